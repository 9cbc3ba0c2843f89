//go:build !linux

package proctest

import "os/exec"

// DieWithTest does nothing here: only Linux kills a child when its parent
// dies (on Linux, it has the kernel kill c's program when the test process
// dies).
func DieWithTest(c *exec.Cmd) {}
