package converge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
)

var noDeadline time.Time

var echo = taskEcho{leaseToken: "lease-1", stage: StageWork, claimEpoch: 7}

func workTask() *pb.StageTask {
	return &pb.StageTask{
		Stage: StageWork, Kind: "k", KindVersion: 0, Reaction: "work", LeaseToken: "lease-1", ClaimEpoch: 7,
		Generation: 3, Attempt: 2, ProviderConfig: []byte(`{"o":1}`), ProviderBundle: []byte("b"),
		Request: &pb.StageTask_WorkReq{WorkReq: &pb.WorkRequest{
			Resource: &pb.Resource{Id: make([]byte, 16), Kind: "k", Name: "n", Labels: map[string]string{"a": "b"}},
			Status:   []byte(`{"s":1}`),
		}},
	}
}

func TestRequestFromTaskDecodesTheWorkPayload(t *testing.T) {
	req, err := requestFromTask(workTask(), ProviderConfig{Spec: json.RawMessage(`{"d":1}`)}, noDeadline, nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.Reaction != "work" || req.Stage != StageWork || req.Trigger != TriggerSpecChange ||
		req.KindVersion != 1 || req.Resource.KindVersion != 1 || req.Generation != 3 || req.Attempt != 2 ||
		string(req.Resource.Spec) != "{}" || string(req.Status) != `{"s":1}` || string(req.ConfigOverride) != `{"o":1}` ||
		string(req.BundleOverride) != "b" || req.Resource.Labels["a"] != "b" || !req.Resource.ID.IsZero() {
		t.Fatalf("decoded: %+v", req)
	}
}

func TestRequestFromTaskRefusesMalformedTasks(t *testing.T) {
	cases := map[string]func(*pb.StageTask){
		"empty reaction":   func(t *pb.StageTask) { t.Reaction = "" },
		"unknown stage":    func(t *pb.StageTask) { t.Stage = 42 },
		"no payload":       func(t *pb.StageTask) { t.Request = nil },
		"payload mismatch": func(t *pb.StageTask) { t.Stage = StageCompose },
		"no resource":      func(t *pb.StageTask) { t.GetWorkReq().Resource = nil },
		"bad spec":         func(t *pb.StageTask) { t.GetWorkReq().Resource.Spec = []byte("{") },
		"bad override":     func(t *pb.StageTask) { t.ProviderConfig = []byte("nope") },
	}
	for name, mutate := range cases {
		task := workTask()
		mutate(task)
		if _, err := requestFromTask(task, ProviderConfig{}, noDeadline, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestRequestFromTaskDecodesOtherStages(t *testing.T) {
	res := &pb.Resource{Kind: "k", Name: "n", Spec: []byte(`{"a":1}`), IsReady: true}
	op := &pb.StageTask{Stage: StageOperate, Reaction: "ping", Request: &pb.StageTask_OperateReq{OperateReq: &pb.OperateRequest{
		Resource: res, Operation: &pb.Operation{Verb: "ping", Input: []byte(`{"x":1}`), Attempts: 1}}}}
	req, err := requestFromTask(op, ProviderConfig{}, noDeadline, nil)
	if err != nil || req.Operation == nil || req.Operation.Verb != "ping" || string(req.Operation.Input) != `{"x":1}` || req.Trigger != TriggerOperation {
		t.Fatalf("operate: %+v %v", req, err)
	}
	rollup := &pb.StageTask{Stage: StageRollup, Reaction: "rollup", Request: &pb.StageTask_RollupReq{RollupReq: &pb.RollupRequest{
		Root: res, Descendants: []*pb.Resource{res, res}, DescendantsIncluded: true,
		Summary: &pb.RollupSummary{Total: 2, ByKind: map[string]int64{"k": 2}, NotReady: []*pb.ResourceRef{{Kind: "k", Name: "m"}}, NotReadyTotal: 1}}}}
	req, err = requestFromTask(rollup, ProviderConfig{}, noDeadline, nil)
	if err != nil || len(req.Descendants) != 2 || !req.Descendants[0].IsReady || req.Trigger != TriggerChildrenSettled ||
		!req.DescendantsIncluded || req.Summary == nil || req.Summary.Total != 2 || req.Summary.ByKind["k"] != 2 ||
		req.Summary.ByPhase == nil || len(req.Summary.NotReady) != 1 || req.Summary.NotReady[0] != Ref("k", "m") || req.Summary.Ready() != 1 {
		t.Fatalf("rollup: %+v %v", req, err)
	}
	// A broker that sends no summary still gives a rollup handler one (empty, maps not nil).
	rollup.GetRollupReq().Summary = nil
	if req, err = requestFromTask(rollup, ProviderConfig{}, noDeadline, nil); err != nil || req.Summary == nil || req.Summary.ByKind == nil {
		t.Fatalf("rollup without a summary: %+v %v", req, err)
	}
	react := &pb.StageTask{Stage: StageReact, Reaction: "r", Trigger: "reactor", Request: &pb.StageTask_ReactReq{ReactReq: &pb.ReactRequest{
		Resource: res, Transition: TransitionSynced, DedupToken: "tok"}}}
	req, err = requestFromTask(react, ProviderConfig{}, noDeadline, nil)
	if err != nil || req.Transition != TransitionSynced || req.DedupToken != "tok" {
		t.Fatalf("react: %+v %v", req, err)
	}
	var spec struct{ A int }
	if err := req.Spec(&spec); err != nil || spec.A != 1 {
		t.Fatalf("Spec: %v %v", spec, err)
	}
	var wrong struct{ A string }
	if err := req.Spec(&wrong); !IsTerminal(err) {
		t.Fatalf("a spec that does not fit must be terminal, got %v", err)
	}
}

func TestRequestFromTaskReadsDryRunOnComposeOnly(t *testing.T) {
	res := &pb.Resource{Kind: "k", Name: "n"}
	compose := &pb.StageTask{Stage: StageCompose, Reaction: "compose", DryRun: true,
		Request: &pb.StageTask_ComposeReq{ComposeReq: &pb.ComposeRequest{Root: res}}}
	req, err := requestFromTask(compose, ProviderConfig{}, noDeadline, nil)
	if err != nil || !req.DryRun() {
		t.Fatalf("a dry-run compose: %+v %v", req, err)
	}
	compose.DryRun = false
	if req, err = requestFromTask(compose, ProviderConfig{}, noDeadline, nil); err != nil || req.DryRun() {
		t.Fatalf("a real compose: %+v %v", req, err)
	}
	work := workTask()
	work.DryRun = true
	if req, err = requestFromTask(work, ProviderConfig{}, noDeadline, nil); err != nil || req.DryRun() {
		t.Fatalf("only a compose is a dry run: %+v %v", req, err)
	}
	if marked := (ReactionRequest{}).WithDryRun(true); !marked.DryRun() {
		t.Fatal("WithDryRun")
	}
}

func TestCompleteFromOutcomeWorkStage(t *testing.T) {
	o := StatusOutcome(map[string]any{"ok": true}).WithCondition(ReadyCondition(true, "Fine", "all good")).WithOutput(json.RawMessage(`[1]`))
	c, err := completeFromOutcome(echo, o)
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseToken != "lease-1" || c.ClaimEpoch != 7 || c.Stage != StageWork || string(c.Status) != `{"ok":true}` ||
		string(c.Output) != `[1]` || len(c.Conditions) != 1 || c.Conditions[0].Status != "True" || c.Compose != nil || c.ErrorMessage != "" {
		t.Fatalf("complete: %v", c)
	}
	empty, err := completeFromOutcome(echo, nil)
	if err != nil || empty.Status != nil || empty.ErrorMessage != "" {
		t.Fatalf("a nil outcome is an empty success: %v %v", empty, err)
	}
}

func TestCompleteFromOutcomeComposeStage(t *testing.T) {
	ce := taskEcho{leaseToken: "l", stage: StageCompose, claimEpoch: 1}
	o := StatusOutcome(map[string]any{"composed": 2}).
		WithChild(NewChild("leaf", 1, "a", map[string]any{"i": 0}).WithLabel("x", "y")).
		WithChild(NewChild("leaf", 1, "b", nil)).
		WithEdge(NewEdge(Ref("leaf", "b"), Ref("leaf", "a")).WithValue(Flow("/up", "/echo/i"))).
		WithConfig(ProviderConfigSpec{Name: "cfg", Kind: "leaf", KindVersion: 1, IsDefault: true, Spec: map[string]any{"z": 1}})
	c, err := completeFromOutcome(ce, o)
	if err != nil {
		t.Fatal(err)
	}
	cr := c.Compose
	if cr == nil || c.Status != nil || string(cr.Status) != `{"composed":2}` || len(cr.Desired) != 2 ||
		string(cr.Desired[0].Spec) != `{"i":0}` || cr.Desired[0].Labels["x"] != "y" || string(cr.Desired[1].Spec) != "null" ||
		cr.Edges[0].From.Name != "b" || cr.Edges[0].To.Name != "a" || cr.Edges[0].Values[0].SourceField != "/echo/i" ||
		!cr.Configs[0].IsDefault || string(cr.Configs[0].Spec) != `{"z":1}` {
		t.Fatalf("compose: %v", c)
	}
	if _, err := completeFromOutcome(ce, (&Outcome{}).WithChild(NewChild("leaf", 0, "v0", nil))); err == nil {
		t.Fatal("a child without a version must not encode")
	}
}

func TestResultCompleteMapsErrors(t *testing.T) {
	c := resultComplete(echo, nil, errors.New("flaky"))
	if c.ErrorMessage != "flaky" || c.Terminal {
		t.Fatalf("transient: %v", c)
	}
	c = resultComplete(echo, nil, Terminal(errors.New("bad spec")))
	if c.ErrorMessage != "bad spec" || !c.Terminal || c.LeaseToken != "lease-1" || c.ClaimEpoch != 7 {
		t.Fatalf("terminal: %v", c)
	}
	c = resultComplete(echo, StatusOutcome(func() {}), nil)
	if !c.Terminal || !strings.Contains(c.ErrorMessage, "cannot encode outcome") {
		t.Fatalf("unencodable outcome: %v", c)
	}
	if failComplete(echo, "", false).ErrorMessage == "" {
		t.Fatal("an empty failure message would read as success")
	}
	wrapped := errors.Join(errors.New("ctx"), Terminalf("deep %d", 1))
	if !IsTerminal(wrapped) || IsTerminal(errors.New("x")) || Terminal(nil) != nil {
		t.Fatal("IsTerminal must see through wrapping")
	}
}

// One decoding rule in every SDK: a key the typed spec does not know is ignored, so a kind
// adding an optional field never breaks a deployed worker.
func TestSpecIgnoresUnknownKeys(t *testing.T) {
	req := &ReactionRequest{Resource: Resource{Spec: json.RawMessage(`{"size": 3, "added_later": {"x": 1}}`)}}
	var spec struct {
		Size int    `json:"size"`
		Tier string `json:"tier"`
	}
	if err := req.Spec(&spec); err != nil || spec.Size != 3 || spec.Tier != "" {
		t.Fatalf("Spec: %+v %v", spec, err)
	}
	var wrong struct {
		Size string `json:"size"`
	}
	if err := req.Spec(&wrong); !IsTerminal(err) {
		t.Fatalf("a value of the wrong type must still be terminal, got %v", err)
	}
}
