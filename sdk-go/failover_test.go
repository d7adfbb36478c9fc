// Tests of BROKER_ADDR lists, the reconnect backoff (cap and jitter) and failover along the
// list: the order addresses are dialled in, when the worker waits, when the backoff starts
// over, and (against fake brokers) a dead or refusing first broker left at once, streams
// moving along the list with kept results following the worker, and a silent (black-holed)
// connection left by keepalive.

package converge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestBrokerListsKeepTheirOrderAndEachEntryItsScheme(t *testing.T) {
	for raw, want := range map[string]string{
		"a:9090,b:9090": "http://a:9090|http://b:9090",
		// Spaces around entries are trimmed; http:// and bare entries are both h2c.
		" http://10.0.0.1:9090 , broker-2.svc:9091 ,[::1]:9092 ": "http://10.0.0.1:9090|http://broker-2.svc:9091|http://[::1]:9092",
		// TLS entries keep their own host (each one's server name).
		"https://b1.example:9443,https://b2.example:9443": "https://b1.example:9443|https://b2.example:9443",
		// A duplicate is dialled twice, in its place.
		"a:1,b:2,a:1": "http://a:1|http://b:2|http://a:1",
	} {
		cfg, err := parseEnv(map[string]string{"BROKER_ADDR": raw})
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got := strings.Join(cfg.BrokerAddrs, "|"); got != want {
			t.Errorf("%q: %s, want %s", raw, got, want)
		}
	}
	cfg, _ := parseEnv(map[string]string{"BROKER_ADDR": "https://b1.example:9443,https://b2.example:9443"})
	for i, host := range []string{"b1.example", "b2.example"} {
		tc, err := cfg.tlsConfig(cfg.BrokerAddrs[i])
		if err != nil || tc.ServerName != host {
			t.Errorf("entry %d: server name %v, %v", i, tc, err)
		}
	}
}

func TestBadBrokerListsAreErrorsNamingBrokerAddr(t *testing.T) {
	for raw, needles := range map[string][]string{
		"a:1,,b:2":               {"entry 2 of 3", "is empty"},
		"a:1,b:2,":               {"entry 3 of 3", "is empty"},
		",a:1":                   {"entry 1 of 2", "is empty"},
		" , ":                    {"entry 1 of 2", "is empty"},
		"a:1,ftp://b:2":          {"entry 2 of 2", `"ftp://b:2"`, "https://"},
		"a:1,https://":           {"entry 2 of 2"},
		"a:1,b":                  {"entry 2 of 2"},
		"https://a:1,b:2":        {"mixes https://", "plaintext"},
		"http://a:1,https://b:2": {"mixes https://", "one scheme"},
	} {
		_, err := parseEnv(map[string]string{"BROKER_ADDR": raw})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != "BROKER_ADDR" {
			t.Errorf("%q: %v", raw, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "BROKER_ADDR=") {
			t.Errorf("%q: %v", raw, err)
		}
		for _, n := range needles {
			if !strings.Contains(err.Error(), n) {
				t.Errorf("%q: %q lacks %q", raw, err, n)
			}
		}
	}
}

func TestValidateChecksEveryBrokerAndTheCap(t *testing.T) {
	for _, c := range []struct {
		addrs  []string
		needle string
	}{
		{nil, "at least one"},
		{[]string{"http://a:1", "https://b:2"}, "mixes https://"},
		{[]string{"http://a:1", "ftp://b:2"}, "entry 2 of 2"},
	} {
		cfg := NewConfig(c.addrs...)
		err := cfg.validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Var != "BrokerAddrs" || !strings.Contains(err.Error(), c.needle) {
			t.Errorf("%v: %v", c.addrs, err)
		}
	}
	cfg := NewConfig("a:1", "b:2")
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	cfg.ReconnectMax = ReconnectCap + time.Millisecond
	var ce *ConfigError
	if err := cfg.validate(); !errors.As(err, &ce) || ce.Var != "ReconnectMax" || !strings.Contains(err.Error(), "5s") {
		t.Fatalf("a ceiling beyond the cap: %v", err)
	}
}

// around reports whether d is a jittered sleep around raw (±25 %, never above max).
func around(d, raw, max time.Duration) bool {
	return d >= raw*3/4 && d <= min(raw*5/4, max)
}

func TestBackoffDoublesToTheCeilingWithJitter(t *testing.T) {
	b := newBackoff(DefaultReconnectMin, DefaultReconnectMax)
	var raws []time.Duration
	for i := 0; i < 6; i++ {
		raw := b.current
		raws = append(raws, raw)
		if d := b.next(); !around(d, raw, DefaultReconnectMax) {
			t.Fatalf("jitter out of ±25%%: %v for %v", d, raw)
		}
	}
	want := []time.Duration{1, 2, 4, 5, 5, 5}
	for i := range want {
		if raws[i] != want[i]*time.Second {
			t.Fatalf("raw delays %v", raws)
		}
	}
	b.reset()
	if b.current != time.Second {
		t.Fatal("reset")
	}
}

func TestBackoffNeverSleepsBeyondTheCapAndIsJittered(t *testing.T) {
	b := newBackoff(DefaultReconnectMin, ReconnectCap)
	lo, hi := time.Hour, time.Duration(0)
	distinct := map[time.Duration]bool{}
	for i := 0; i < 2000; i++ {
		d := b.next()
		if d > ReconnectCap || d < 750*time.Millisecond {
			t.Fatalf("sleep %d is %v", i, d)
		}
		if i >= 4 {
			lo, hi = min(lo, d), max(hi, d)
			distinct[d] = true
		}
	}
	// At the ceiling the sleeps still spread over [3.75 s, 5 s], not all on 5 s.
	if lo < 3750*time.Millisecond || lo >= 4*time.Second || hi <= 4700*time.Millisecond {
		t.Fatalf("sleeps at the cap span [%v, %v]", lo, hi)
	}
	if len(distinct) < 1000 {
		t.Fatalf("only %d distinct sleeps: not jittered", len(distinct))
	}
}

func TestFailuresWalkTheListInOrderAndSleepOncePerRound(t *testing.T) {
	f := newFailover(3, time.Second, 5*time.Second)
	order := []int{f.current}
	var sleeps []time.Duration
	for i := 0; i < 9; i++ {
		sleeps = append(sleeps, f.failed())
		order = append(order, f.current)
	}
	if got := fmt.Sprint(order); got != "[0 1 2 0 1 2 0 1 2 0]" {
		t.Fatalf("order %s", got)
	}
	for i, d := range sleeps {
		switch i {
		case 2:
			if !around(d, time.Second, 5*time.Second) {
				t.Errorf("sleep %d: %v", i, d)
			}
		case 5:
			if !around(d, 2*time.Second, 5*time.Second) {
				t.Errorf("sleep %d: %v", i, d)
			}
		case 8:
			if !around(d, 4*time.Second, 5*time.Second) {
				t.Errorf("sleep %d: %v", i, d)
			}
		default:
			if d != 0 {
				t.Errorf("sleep %d within a round: %v", i, d)
			}
		}
	}
}

func TestAnEndedStreamMovesOnAfterAJitteredWait(t *testing.T) {
	f := newFailover(2, time.Second, 5*time.Second)
	if d := f.ended(time.Minute); f.current != 1 || !around(d, time.Second, 5*time.Second) {
		t.Fatalf("after a healthy stream: at %d, wait %v", f.current, d)
	}
	if d := f.ended(time.Minute); f.current != 0 || !around(d, time.Second, 5*time.Second) {
		t.Fatalf("wrapping around: at %d, wait %v", f.current, d)
	}
	// A stream dropped at once escalates (a broker that accepts and drops streams).
	one := newFailover(1, time.Second, 5*time.Second)
	var ds []time.Duration
	for i := 0; i < 5; i++ {
		ds = append(ds, one.ended(0))
	}
	if !around(ds[0], time.Second, 5*time.Second) || !around(ds[1], 2*time.Second, 5*time.Second) ||
		!around(ds[4], 5*time.Second, 5*time.Second) {
		t.Fatalf("waits %v", ds)
	}
}

func TestAFailoverThatConnectsResetsTheBackoff(t *testing.T) {
	f := newFailover(2, time.Second, 5*time.Second)
	for i := 0; i < 10; i++ {
		f.failed() // both brokers down for a while: the backoff climbs to the ceiling
	}
	if d := f.failed(); d != 0 || f.current != 1 {
		t.Fatalf("within the round: at %d, wait %v", f.current, d)
	}
	if d := f.ended(10 * time.Millisecond); !around(d, time.Second, 5*time.Second) {
		t.Fatalf("the recovery must reset the backoff: %v", d)
	}
	// A config pull that succeeds after failures is a recovery too, and does not move.
	g := newFailover(2, time.Second, 5*time.Second)
	for i := 0; i < 6; i++ {
		g.failed()
	}
	g.succeeded()
	if g.current != 0 || g.failed() != 0 || !around(g.failed(), time.Second, 5*time.Second) {
		t.Fatal("after a success the round and the backoff start over")
	}
}

// deadAddr is a loopback address nothing listens on (bound, then released).
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// refusingBroker answers every call UNAUTHENTICATED: a stream it never takes.
type refusingBroker struct {
	pb.UnimplementedWorkerServiceServer
	calls atomic.Int32
}

func (r *refusingBroker) GetProviderConfig(context.Context, *pb.GetProviderConfigRequest) (*pb.GetProviderConfigResponse, error) {
	r.calls.Add(1)
	return nil, status.Error(codes.Unauthenticated, "no entry")
}

func (r *refusingBroker) WorkStream(grpc.BidiStreamingServer[pb.WorkStreamClientMsg, pb.WorkStreamServerMsg]) error {
	r.calls.Add(1)
	return status.Error(codes.Unauthenticated, "no entry")
}

func echoProvider() Provider {
	return ProviderFunc(KindVersion{"k", 1}, func(_ context.Context, req *ReactionRequest) (*Outcome, error) {
		return StatusOutcome(map[string]any{"name": req.Resource.Name}), nil
	})
}

func TestADeadFirstBrokerIsSkippedWithoutWaiting(t *testing.T) {
	fb, addr := startFakeBroker(t)
	// A wait after the refused first address would take at least 3.75 s; the second is
	// tried at once because the round of the list is not over.
	serveFake(t, addr, []Provider{echoProvider()}, WithBrokerAddr(deadAddr(t), addr),
		WithReconnectBackoff(5*time.Second, 5*time.Second))
	start := time.Now()
	s := fb.nextStream(t)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the second broker got the stream after %v", took)
	}
	if s.recv(t, false).GetSubscribe() == nil {
		t.Fatal("first frame is not Subscribe")
	}
	if fb.pulls.Load() != 1 {
		t.Fatalf("configs must be primed from the second broker: %d pulls", fb.pulls.Load())
	}
	s.send(task("t1", 1, "k", 0))
	if c := s.recv(t, false).GetComplete(); c.GetLeaseToken() != "t1" || c.GetErrorMessage() != "" {
		t.Fatalf("complete: %v", c)
	}
}

func TestARefusingBrokerIsLeftForTheNextAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := &refusingBroker{}
	srv := grpc.NewServer()
	pb.RegisterWorkerServiceServer(srv, refusing)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	fb, addr := startFakeBroker(t)
	serveFake(t, addr, []Provider{echoProvider()}, WithBrokerAddr(l.Addr().String(), addr),
		WithReconnectBackoff(time.Second, 5*time.Second))
	s := fb.nextStream(t)
	s.recv(t, false)
	if refusing.calls.Load() < 1 {
		t.Fatal("the first broker of the list was not tried first")
	}
	// A stream that ends moves along the list: one jittered wait (0.75..1.25 s), then the
	// refusing broker, whose refused stream is a failure within the round (no wait), then
	// here again. Taking the refusal for an opened stream would add a 1.5..2.5 s wait.
	before := refusing.calls.Load()
	start := time.Now()
	close(s.done)
	s = fb.nextStream(t)
	s.recv(t, false)
	took := time.Since(start)
	if refusing.calls.Load() <= before {
		t.Fatal("the list was not walked in order")
	}
	if took < 700*time.Millisecond || took > 2*time.Second {
		t.Fatalf("back on the good broker after %v", took)
	}
}

func TestStreamsMoveAlongTheListAndKeptResultsFollow(t *testing.T) {
	fa, a := startFakeBroker(t)
	fb, b := startFakeBroker(t)
	serveFake(t, a, []Provider{echoProvider()}, WithBrokerAddr(a, b))

	s := fa.nextStream(t)
	s.recv(t, false)
	s.send(task("kept", 7, "k", 0))
	if c := s.recv(t, false).GetComplete(); c.GetLeaseToken() != "kept" {
		t.Fatalf("complete: %v", c)
	}
	close(s.done) // the first broker goes away before acking: the result is kept

	s = fb.nextStream(t)
	sub := s.recv(t, false).GetSubscribe()
	if len(sub.GetResumed()) != 1 || sub.Resumed[0].LeaseToken != "kept" || sub.Resumed[0].ClaimEpoch != 7 {
		t.Fatalf("the second broker must hear of the unacked result: %v", sub)
	}
	if c := s.recv(t, false).GetComplete(); c.GetLeaseToken() != "kept" {
		t.Fatalf("the kept result must be re-sent to the next broker: %v", c)
	}
	s.send(ackMsg("kept", 7, true))
	s.send(task("on-b", 1, "k", 0))
	if c := s.recv(t, false).GetComplete(); c.GetLeaseToken() != "on-b" {
		t.Fatalf("complete: %v", c)
	}
	s.send(ackMsg("on-b", 1, true))
	close(s.done)

	s = fa.nextStream(t) // wrapped around
	if sub := s.recv(t, false).GetSubscribe(); len(sub.GetResumed()) != 0 {
		t.Fatalf("acked results must be forgotten: %v", sub)
	}
}

// frozenRelay forwards TCP connections to target until freeze; from then on it keeps both
// sides open but forwards nothing, as a network partition or a stopped (SIGSTOP) broker
// looks to the worker.
type frozenRelay struct {
	addr   string
	frozen atomic.Bool
}

func startRelay(t *testing.T, target string) *frozenRelay {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &frozenRelay{addr: l.Addr().String()}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	pump := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 16<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if r.frozen.Load() {
				continue
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			go pump(out, in)
			go pump(in, out)
		}
	}()
	return r
}

func TestASilentConnectionIsDroppedByKeepaliveAndTheNextBrokerTaken(t *testing.T) {
	t.Parallel()
	fa, a := startFakeBroker(t)
	fb, b := startFakeBroker(t)
	relay := startRelay(t, a)
	serveFake(t, a, []Provider{echoProvider()}, WithBrokerAddr(relay.addr, b))
	fa.nextStream(t).recv(t, false)

	relay.frozen.Store(true)
	start := time.Now()
	// Keepalive: a PING after 10 s without a frame, dropped 10 s later without its answer.
	var s *brokerStream
	select {
	case s = <-fb.streams:
	case <-time.After(35 * time.Second):
		t.Fatal("the worker did not leave the silent broker")
	}
	if took := time.Since(start); took < 9*time.Second {
		t.Fatalf("left after %v: before any keepalive could have failed", took)
	}
	s.recv(t, false)
	s.send(task("after", 1, "k", 0))
	if c := s.recv(t, false).GetComplete(); c.GetLeaseToken() != "after" || c.GetErrorMessage() != "" {
		t.Fatalf("complete: %v", c)
	}
}
