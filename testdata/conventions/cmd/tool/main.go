// Command tool is a main: rule A1's result shape does not apply to it, so
// NewTool is not reported.
package main

// Tool is a tool.
type Tool struct{}

// ToolOptions configures a Tool.
type ToolOptions struct{}

// NewTool returns a value.
func NewTool(opts ToolOptions) Tool { return Tool{} }

func main() { _ = NewTool(ToolOptions{}) }
