// Shared helpers for the Go real-client tests: start the real `purgatory` binary on loopback
// ports the kernel picks, read back from its ready file (with its two embedded followers,
// replica ids 2 and 3, and its admin API), talk to its admin API (/api/state, follower
// pause/resume), wait for conditions with generous deadlines, and route the clients' own
// logs into the test log so that a failure shows what the client saw.
//
// Each test gets its own broker, so that pausing followers or leaving group state behind
// in one test cannot change what another test sees.
package gotests

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the repository root: `go test` runs in the package directory, tests/go.
func repoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("getwd: %v", err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// brokerBinary is $PURGATORY_BIN, or <repo>/target/release/purgatory. Another process may
// still be building it, so a missing binary is waited for (not built here).
func brokerBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("PURGATORY_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(t), "target", "release", "purgatory")
	}
	waitFor(t, 5*time.Minute, "the broker binary "+bin+" to exist (build it with `cargo build --release`)", func() bool {
		fi, err := os.Stat(bin)
		return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
	})
	return bin
}

// Broker is one running `purgatory serve`: one broker and its embedded followers.
type Broker struct {
	Bootstrap string // host:port of the Kafka listener
	Admin     string // http://host:port of the admin API
	*server
}

// startBroker starts a broker for this test and stops it when the test ends.
func startBroker(t *testing.T) *Broker {
	t.Helper()
	root := repoRoot(t)
	s, ready := launch(t, "broker",
		"--config", filepath.Join(root, "config", "broker.toml"),
		"--listen", "127.0.0.1:0",
	)
	b := &Broker{Bootstrap: ready.Bootstrap, Admin: "http://" + ready.Admin, server: s}
	t.Logf("broker %s (admin %s), log %s", b.Bootstrap, b.Admin, b.LogPath)
	return b
}

// server is a running `purgatory serve` process, its stdout and stderr in LogPath.
type server struct {
	LogPath string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
}

// announcement is what `purgatory serve --ready-file` writes once every listener serves:
// the addresses they are bound to (see the end of `purgatory serve --help`).
type announcement struct {
	Brokers []struct {
		ID         int    `json:"id"`
		Listener   string `json:"listener"`   // the address bound
		Advertised string `json:"advertised"` // the host:port Metadata names
	} `json:"brokers"`
	Bootstrap string `json:"bootstrap"` // the advertised addresses, joined by commas
	Admin     string `json:"admin"`     // host:port of the admin API ("" with --no-admin)
}

// launched counts the servers this test binary has started; with its pid it names their
// logs, so that two runs at once, or two tests in one run, do not write to the same file.
var launched atomic.Int64

// launch starts `purgatory serve` with args (the caller's --listen gives port 0) and the
// admin API on a port the kernel picks, and waits for the ready file (--ready-file) that
// names the ports bound. It fails the test if the process exits first (naming its log) or
// if the file has not appeared within 30 s. The process is stopped when the test ends;
// its output goes to <repo>/target/go-NAME-PID-N.log.
//
// Asking for port 0 and reading back what was bound leaves no window in which another
// process can take a port between its being chosen and the broker binding it, as a port
// found free beforehand could be.
func launch(t *testing.T, name string, args ...string) (*server, announcement) {
	t.Helper()
	bin := brokerBinary(t)
	root := repoRoot(t)
	if err := os.MkdirAll(filepath.Join(root, "target"), 0o755); err != nil {
		t.Fatalf("creating %s/target: %v", root, err)
	}
	n := fmt.Sprintf("%d-%d", os.Getpid(), launched.Add(1))
	s := &server{
		LogPath: filepath.Join(root, "target", fmt.Sprintf("go-%s-%s.log", name, n)),
		done:    make(chan struct{}),
	}
	readyPath := filepath.Join(t.TempDir(), "ready.json")
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		t.Fatalf("creating the %s log: %v", name, err)
	}
	s.log = logFile
	args = append([]string{"serve"}, args...)
	args = append(args, "--admin-listen", "127.0.0.1:0", "--ready-file", readyPath)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Dir = root
	s.cmd.Stdout = logFile
	s.cmd.Stderr = logFile
	s.cmd.Env = os.Environ()
	if os.Getenv("RUST_LOG") == "" {
		// Each delayed operation's life, ISR changes and each rebalance's story: the
		// evidence a failing test needs.
		s.cmd.Env = append(s.cmd.Env, "RUST_LOG=info")
	}
	if err := s.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.stop)

	// The file is renamed into place whole: once it exists, it is complete.
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, err := os.ReadFile(readyPath)
		if err == nil {
			var ready announcement
			if err := json.Unmarshal(body, &ready); err != nil {
				t.Fatalf("decoding the %s's ready file: %v\n%s", name, err, body)
			}
			if ready.Admin == "" || len(ready.Brokers) == 0 {
				t.Fatalf("the %s's ready file names no admin API or no broker: %s", name, body)
			}
			return s, ready
		}
		if !os.IsNotExist(err) {
			t.Fatalf("reading the %s's ready file: %v", name, err)
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(s.LogPath)
			t.Fatalf("%s exited before writing its ready file (%v); its log %s:\n%s", name, s.cmd.ProcessState, s.LogPath, tail(out, 4000))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s wrote no ready file within 30 s; see %s", name, s.LogPath)
		}
	}
}

// stop sends SIGTERM, then kills the process if it has not exited after 10 s.
func (s *server) stop() {
	select {
	case <-s.done:
	default:
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	}
	s.log.Close()
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

var adminHTTP = &http.Client{Timeout: 5 * time.Second}

func (b *Broker) stateRaw() ([]byte, error) {
	resp, err := adminHTTP.Get(b.Admin + "/api/state")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/state: %s: %s", resp.Status, body)
	}
	return body, nil
}

// State is the part of GET /api/state these tests read.
type State struct {
	Partitions []struct {
		Topic         string  `json:"topic"`
		Partition     int32   `json:"partition"`
		HighWatermark int64   `json:"high_watermark"`
		LogEndOffset  int64   `json:"log_end_offset"`
		ISR           []int32 `json:"isr"`
	} `json:"partitions"`
	Purgatories map[string]struct {
		Pending []struct {
			Description string   `json:"description"`
			Keys        []string `json:"keys"`
		} `json:"pending"`
	} `json:"purgatories"`
}

func (b *Broker) State(t testing.TB) State {
	t.Helper()
	body, err := b.stateRaw()
	if err != nil {
		t.Fatalf("reading the broker's state: %v", err)
	}
	var s State
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("decoding /api/state: %v\n%s", err, tail(body, 2000))
	}
	return s
}

// Follower pauses or resumes an embedded follower (action "pause" or "resume").
func (b *Broker) Follower(t testing.TB, id int, action string) {
	t.Helper()
	url := fmt.Sprintf("%s/api/followers/%d/%s", b.Admin, id, action)
	resp, err := adminHTTP.Post(url, "application/json", strings.NewReader(""))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s: %s", url, resp.Status, body)
	}
}

// waitFor polls cond until it holds; after timeout it fails the test naming what it
// waited for. The timeout is a generous deadline for an event, not a timing assertion.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testLog is an io.Writer into t.Log that is safe to write to from client goroutines
// until the test has finished (later writes are dropped rather than panicking). The
// clients' logs appear in `go test` output only when the test fails (or with -v).
type testLog struct {
	mu   sync.Mutex
	t    *testing.T
	name string
	done bool
}

// newTestLog must be called before the clients are created, so that its cleanup (which
// stops forwarding) runs after theirs.
func newTestLog(t *testing.T, name string) *testLog {
	l := &testLog{t: t, name: name}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("[%s] %s", l.name, strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
