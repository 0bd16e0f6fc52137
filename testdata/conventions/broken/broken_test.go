package broken

// A test file is not checked: none of these is reported.

type TestOption func()

func NewTestWidget(n int) Widget { return Widget{n} }

var errShape = "n; expected 1"
