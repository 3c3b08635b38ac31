// Shared helpers for the Go real-client tests: start the real `purgatory` binary on free
// loopback ports (with its two embedded followers, replica ids 2 and 3, and its admin API),
// talk to its admin API (/api/state, follower pause/resume), wait for conditions with
// generous deadlines, and route the clients' own logs into the test log so that a failure
// shows what the client saw.
//
// Each test gets its own broker, so that pausing followers or leaving group state behind
// in one test cannot change what another test sees.
package gotests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// Broker is one running `purgatory serve`.
type Broker struct {
	Bootstrap string // host:port of the Kafka listener
	Admin     string // http://host:port of the admin API
	LogPath   string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
}

// startBroker starts a broker for this test and stops it when the test ends.
func startBroker(t *testing.T) *Broker {
	t.Helper()
	bin := brokerBinary(t)
	// A port found free can be taken before the broker binds it: a broker that stops on
	// "Address already in use" is started again on other ports.
	for attempt := 0; attempt < 5; attempt++ {
		b, retry := tryStartBroker(t, bin)
		if b != nil {
			t.Cleanup(b.stop)
			return b
		}
		if !retry {
			break
		}
	}
	t.Fatalf("broker did not start: its ports were taken 5 times")
	return nil
}

// freePorts returns n distinct free loopback ports. The listeners are held until all are
// bound: ports asked for one after the other could otherwise come back equal.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// tryStartBroker returns the running broker, or (nil, true) if a port was taken.
func tryStartBroker(t *testing.T, bin string) (*Broker, bool) {
	t.Helper()
	root := repoRoot(t)
	ports := freePorts(t, 2)
	b := &Broker{
		Bootstrap: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		Admin:     fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		LogPath:   filepath.Join(root, "target", fmt.Sprintf("go-broker-%d.log", ports[0])),
		done:      make(chan struct{}),
	}
	logFile, err := os.Create(b.LogPath)
	if err != nil {
		t.Fatalf("creating the broker log: %v", err)
	}
	b.log = logFile
	b.cmd = exec.Command(bin, "serve",
		"--config", filepath.Join(root, "config", "broker.toml"),
		"--listen", b.Bootstrap,
		"--admin-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
	)
	b.cmd.Dir = root
	b.cmd.Stdout = logFile
	b.cmd.Stderr = logFile
	b.cmd.Env = os.Environ()
	if os.Getenv("RUST_LOG") == "" {
		// Each delayed operation's life, ISR changes and each rebalance's story: the
		// evidence a failing test needs.
		b.cmd.Env = append(b.cmd.Env, "RUST_LOG=info")
	}
	if err := b.cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		b.cmd.Wait()
		close(b.done)
	}()

	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := b.stateRaw(); err == nil {
			t.Logf("broker %s (admin %s), log %s", b.Bootstrap, b.Admin, b.LogPath)
			return b, false
		}
		select {
		case <-b.done:
			logFile.Close()
			out, _ := os.ReadFile(b.LogPath)
			if bytes.Contains(out, []byte("Address already in use")) {
				t.Logf("broker ports %v were taken; retrying on others", ports)
				return nil, true
			}
			t.Fatalf("broker exited before answering /api/state (%v); its log %s:\n%s", b.cmd.ProcessState, b.LogPath, tail(out, 4000))
		case <-time.After(50 * time.Millisecond):
		}
	}
	b.stop()
	t.Fatalf("broker did not answer %s/api/state within 30 s; see %s", b.Admin, b.LogPath)
	return nil, false
}

// stop sends SIGTERM, then kills the broker if it has not exited after 10 s.
func (b *Broker) stop() {
	select {
	case <-b.done:
	default:
		b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			b.cmd.Process.Kill()
			<-b.done
		}
	}
	b.log.Close()
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
