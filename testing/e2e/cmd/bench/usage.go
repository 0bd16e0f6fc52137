package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/ccmkit/ccmkit/testing/e2e/internal/proc"
)

// usage is what the CCM process used during one run: the figures
// example/deploy's resource requests and limits are set from.
type usage struct {
	peakRSS uint64        // VmHWM at the end of the run
	cpu     time.Duration // CPU time from the start of the measurement
	wall    time.Duration
	// peakCPU is the most CPU used in one sampling interval, as a
	// fraction of one core.
	peakCPU float64
}

func (u usage) String() string {
	return fmt.Sprintf("peak RSS %.0f MiB, CPU %.2f s in %.1f s (mean %.0f millicores, peak %.0f millicores over %s)",
		float64(u.peakRSS)/(1<<20), u.cpu.Seconds(), u.wall.Seconds(),
		1000*u.cpu.Seconds()/u.wall.Seconds(), 1000*u.peakCPU, sampleEvery)
}

const sampleEvery = time.Second

// sampler reads a process's usage every sampleEvery until stop.
type sampler struct {
	read  func() (proc.Usage, error)
	done  chan struct{}
	wg    sync.WaitGroup
	start time.Time
	first proc.Usage

	mu   sync.Mutex
	last proc.Usage
	peak float64
	err  error
}

// sample starts sampling read at once; the figures count from now.
func sample(read func() (proc.Usage, error)) (*sampler, error) {
	first, err := read()
	if err != nil {
		return nil, err
	}
	s := &sampler{read: read, done: make(chan struct{}), start: time.Now(), first: first, last: first}
	s.wg.Add(1)
	go s.loop()
	return s, nil
}

func (s *sampler) loop() {
	defer s.wg.Done()
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	prev, prevAt := s.first, s.start
	for {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			u, err := s.read()
			s.mu.Lock()
			if err != nil {
				s.err = err
				s.mu.Unlock()
				return
			}
			s.last = u
			s.peak = max(s.peak, (u.CPU-prev.CPU).Seconds()/now.Sub(prevAt).Seconds())
			s.mu.Unlock()
			prev, prevAt = u, now
		}
	}
}

// stop ends sampling and returns the run's usage, read once more.
func (s *sampler) stop() (usage, error) {
	close(s.done)
	s.wg.Wait()
	u, err := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return usage{}, s.err
	}
	if err != nil {
		return usage{}, err
	}
	return usage{peakRSS: u.PeakRSS, cpu: u.CPU - s.first.CPU, wall: time.Since(s.start), peakCPU: s.peak}, nil
}
