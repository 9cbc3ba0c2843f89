package proctest

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestDieWithTest: a program a test started is killed when the test
// process dies without its cleanups (here it exits at once).
func TestDieWithTest(t *testing.T) {
	if os.Getenv("PROCTEST_CHILD") != "" {
		p := Start(t, "sleep", "60")
		os.Stdout.WriteString(strconv.Itoa(p.Cmd.Process.Pid) + "\n")
		os.Exit(0) // no cleanup runs
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestDieWithTest$")
	cmd.Env = append(os.Environ(), "PROCTEST_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(out)))
	if err != nil {
		t.Fatalf("child printed %q", out)
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("sleep (pid %d) still runs 5 s after the test process that started it died", pid)
		}
	}
}
