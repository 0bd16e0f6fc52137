package loadbalancer_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// Per-port annotations of a provider whose listeners can terminate TLS.
var (
	portAnns    annotation.Set
	certAnn     = portAnns.MustDeclare(annotation.Annotation{Name: "lb.example.com/certificate", Kind: annotation.KindString, PerPort: true, Setting: true, Doc: "Certificate of a TLS port."})
	proxyAnn    = portAnns.MustDeclare(annotation.Annotation{Name: "lb.example.com/proxy-protocol", Kind: annotation.KindBool, PerPort: true, Setting: true, Default: "false", Doc: "PROXY protocol v2 towards the backends."})
	appProtoAnn = portAnns.MustDeclare(annotation.Annotation{Name: "lb.example.com/protocol", Kind: annotation.KindEnum, PerPort: true, Values: []string{"http", "https"}, Doc: "Application protocol of a port."})
	plainAnn    = portAnns.MustDeclare(annotation.Annotation{Name: "lb.example.com/algorithm", Kind: annotation.KindEnum, Setting: true, Values: []string{"round-robin", "least-connections"}, Default: "round-robin", Doc: "Balancing algorithm."})
)

// twoPorts is a Service with ports http/80 and https/443.
func twoPorts(annotations map[string]string) *v1.Service {
	return lbService(func(s *v1.Service) {
		s.Annotations = annotations
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443})
	})
}

var portCaps = loadbalancer.Capabilities{AppProtocols: []string{"http", "https"}}

func portsInput() loadbalancer.DesiredInput {
	return loadbalancer.DesiredInput{Cluster: "c1", Capabilities: portCaps, Annotations: &portAnns, AppProtocolAnnotation: appProtoAnn}
}

// TestDesiredPerPort checks that per-port settings go to their listeners
// only (the default to the ports not listed), that a per-port application
// protocol annotation sets AppProtocol, and that load-balancer-wide
// settings stay in Spec.Settings.
func TestDesiredPerPort(t *testing.T) {
	svc := twoPorts(map[string]string{
		certAnn.Name:     "https=cert-1",
		proxyAnn.Name:    "80=true",
		appProtoAnn.Name: "443=https, http=http",
	})
	lb, err := loadbalancer.Desired(svc, nil, portsInput())
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		Port     int32
		App      string
		Settings map[string]string
	}
	var gotL []got
	for _, l := range lb.Spec.Listeners {
		gotL = append(gotL, got{l.Port, l.AppProtocol, l.Settings})
	}
	want := []got{
		{80, "http", map[string]string{certAnn.Name: "", proxyAnn.Name: "true"}},
		{443, "https", map[string]string{certAnn.Name: "cert-1", proxyAnn.Name: "false"}},
	}
	if diff := cmp.Diff(want, gotL); diff != "" {
		t.Errorf("listeners (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{plainAnn.Name: "round-robin"}, lb.Spec.Settings); diff != "" {
		t.Errorf("Spec.Settings (-want +got):\n%s", diff)
	}
}

// TestDesiredPerPortErrors checks the errors: a PORT that is no port of
// the Service (the admission policy's words), one port named twice, an
// application protocol the spec contradicts or the provider does not
// serve, and a provider misusing AppProtocolAnnotation.
func TestDesiredPerPortErrors(t *testing.T) {
	cases := []struct {
		name  string
		anns  map[string]string
		spec  string // appProtocol of port 80
		in    func(*loadbalancer.DesiredInput)
		want  string
		isErr error
	}{
		{name: "unknown port", anns: map[string]string{certAnn.Name: "8443=c, https=c, admin=c"},
			want:  `annotation "lb.example.com/certificate": port "8443" is not a port of the service: expected a port name or number of spec.ports (http/80, https/443)`,
			isErr: annotation.ErrInvalid},
		{name: "unknown name", anns: map[string]string{certAnn.Name: "admin=c"},
			want:  `annotation "lb.example.com/certificate": port "admin" is not a port of the service: expected a port name or number of spec.ports (http/80, https/443)`,
			isErr: annotation.ErrInvalid},
		{name: "one port twice", anns: map[string]string{certAnn.Name: "443=a,https=b"},
			want:  `annotation "lb.example.com/certificate": port "https" is the port "443" names too: expected each port of spec.ports listed once (http/80, https/443)`,
			isErr: annotation.ErrInvalid},
		{name: "spec and annotation differ", anns: map[string]string{appProtoAnn.Name: "80=https"}, spec: "http",
			want:  `invalid service: service shop/web: port 80/TCP: spec.ports[].appProtocol "http" and annotation "lb.example.com/protocol" "https" differ: expected one application protocol`,
			isErr: loadbalancer.ErrInvalidService},
		{name: "not served", anns: map[string]string{appProtoAnn.Name: "80=https"},
			in:    func(in *loadbalancer.DesiredInput) { in.Capabilities.AppProtocols = []string{"http", "h2"} },
			want:  `service shop/web: annotation "lb.example.com/protocol": port 80/TCP: application protocol "https" (expected one of ["http" "h2"]): not among the application protocols of this provider (Capabilities.AppProtocols)`,
			isErr: loadbalancer.ErrUnsupported},
		{name: "annotation without AppProtocols", in: func(in *loadbalancer.DesiredInput) { in.Capabilities.AppProtocols = nil },
			want: `loadbalancer.Desired: DesiredInput.AppProtocolAnnotation "lb.example.com/protocol" is set, but Capabilities.AppProtocols is empty: expected the application protocols the load balancer serves`},
		{name: "annotation not per port", in: func(in *loadbalancer.DesiredInput) { in.AppProtocolAnnotation = plainAnn },
			want: `loadbalancer.Desired: DesiredInput.AppProtocolAnnotation "lb.example.com/algorithm" is of kind enum (per port: false): expected a per-port enum or string annotation`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := twoPorts(c.anns)
			if c.spec != "" {
				svc.Spec.Ports[0].AppProtocol = ptr(c.spec)
			}
			in := portsInput()
			if c.in != nil {
				c.in(&in)
			}
			_, err := loadbalancer.Desired(svc, nil, in)
			if err == nil || err.Error() != c.want {
				t.Fatalf("Desired error:\n got %v\nwant %s", err, c.want)
			}
			if c.isErr != nil && !errors.Is(err, c.isErr) {
				t.Errorf("errors.Is(%v) = false", c.isErr)
			}
		})
	}
}

// TestPlanPerPortSettingOneWrite checks that a changed certificate on one
// port is one write for that listener only, on a flat cloud and on one
// with listener pools.
func TestPlanPerPortSettingOneWrite(t *testing.T) {
	for _, pools := range []bool{false, true} {
		in := portsInput()
		in.Capabilities.ListenerPools = pools
		before, err := loadbalancer.Desired(twoPorts(map[string]string{certAnn.Name: "https=cert-1"}), nil, in)
		if err != nil {
			t.Fatal(err)
		}
		after, err := loadbalancer.Desired(twoPorts(map[string]string{certAnn.Name: "https=cert-2"}), nil, in)
		if err != nil {
			t.Fatal(err)
		}
		before.ID = "lb-1"
		actions, err := loadbalancer.Plan(after, before)
		if err != nil {
			t.Fatal(err)
		}
		if len(actions) != 1 || actions[0].Kind != loadbalancer.ActionUpdateListener || actions[0].Listener.Port != 443 {
			t.Fatalf("pools %v: Plan = %v; want one UpdateListener of port 443", pools, actions)
		}
		if got := actions[0].Listener.Settings[certAnn.Name]; got != "cert-2" {
			t.Errorf("pools %v: the new listener's certificate = %q; want cert-2", pools, got)
		}
	}
}
