package convergetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	converge "converge.dev/sdk-go"
	"converge.dev/sdk-go/convergetest"
	pb "converge.dev/sdk-go/gen/workerv1"
)

type greeter struct{}

func (greeter) Kind() converge.KindVersion { return converge.KindVersion{Kind: "hello", Version: 1} }

func (greeter) Work(ctx context.Context, req *converge.ReactionRequest) (*converge.Outcome, error) {
	var spec struct {
		Greeting string `json:"greeting"`
		Mode     string `json:"mode"`
	}
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	switch spec.Mode {
	case "terminal":
		return nil, converge.Terminalf("no")
	case "panic":
		panic("boom")
	case "slow":
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return converge.StatusOutcome(map[string]any{"message": spec.Greeting + ", " + req.Resource.Name + "!"}), nil
}

func TestRunCallsTheProvider(t *testing.T) {
	req := convergetest.Request("hello", map[string]any{"greeting": "hi"})
	if req.Reaction != "work" || req.Stage != converge.StageWork || req.Generation != 1 || req.Attempt != 1 || req.Resource.ID.IsZero() {
		t.Fatalf("request defaults: %+v", req)
	}
	o, err := convergetest.Run(context.Background(), greeter{}, req)
	if err != nil || o.Status.(map[string]any)["message"] != "hi, test!" {
		t.Fatalf("Run: %+v %v", o, err)
	}
}

func TestRunReportsTerminalPanicAndDeadline(t *testing.T) {
	ctx := context.Background()
	_, err := convergetest.Run(ctx, greeter{}, convergetest.Request("hello", map[string]any{"mode": "terminal"}))
	if !converge.IsTerminal(err) {
		t.Fatalf("terminal: %v", err)
	}
	_, err = convergetest.Run(ctx, greeter{}, convergetest.Request("hello", map[string]any{"mode": "panic"}))
	if err == nil || converge.IsTerminal(err) || err.Error() != "handler panicked: boom" {
		t.Fatalf("panic: %v", err)
	}
	req := convergetest.Deadline(convergetest.Request("hello", map[string]any{"mode": "slow"}), 20*time.Millisecond)
	if _, err = convergetest.Run(ctx, greeter{}, req); !errors.Is(err, convergetest.ErrDeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	_, err = convergetest.Run(ctx, greeter{}, convergetest.Request("hello", map[string]any{"greeting": 5}))
	if !converge.IsTerminal(err) {
		t.Fatalf("a spec that does not fit is terminal: %v", err)
	}
}

func TestExecuteTaskRunsTheWirePath(t *testing.T) {
	task := &pb.StageTask{
		Stage: converge.StageWork, Kind: "hello", KindVersion: 1, Reaction: "work", LeaseToken: "l", ClaimEpoch: 9,
		Request: &pb.StageTask_WorkReq{WorkReq: &pb.WorkRequest{Resource: &pb.Resource{Name: "n", Spec: []byte(`{"greeting":"yo"}`)}}},
	}
	c := convergetest.ExecuteTask(context.Background(), []converge.Provider{greeter{}}, task, converge.ProviderConfig{})
	if c.ErrorMessage != "" || string(c.Status) != `{"message":"yo, n!"}` || c.LeaseToken != "l" || c.ClaimEpoch != 9 {
		t.Fatalf("complete: %v", c)
	}
	task.Kind = "other"
	if c := convergetest.ExecuteTask(context.Background(), []converge.Provider{greeter{}}, task, converge.ProviderConfig{}); !c.Terminal {
		t.Fatalf("no provider must be terminal: %v", c)
	}
	task.Kind = "hello"
	task.GetWorkReq().Resource.Spec = []byte(`{"mode":"slow"}`)
	task.TaskDeadlineMs = 20
	if c := convergetest.ExecuteTask(context.Background(), []converge.Provider{greeter{}}, task, converge.ProviderConfig{}); c.ErrorMessage != "deadline exceeded" || c.Terminal {
		t.Fatalf("deadline: %v", c)
	}
}
