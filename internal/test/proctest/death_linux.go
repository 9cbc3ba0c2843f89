package proctest

import (
	"os/exec"
	"syscall"
)

// DieWithTest has the kernel kill c's program when the test process dies:
// a go test timeout ends it with a panic, and no cleanup runs.
func DieWithTest(c *exec.Cmd) {
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
