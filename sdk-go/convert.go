package converge

import (
	"encoding/json"
	"fmt"
	"time"

	pb "converge.dev/sdk-go/gen/workerv1"
)

// taskEcho is what a StageComplete must echo from its StageTask.
type taskEcho struct {
	leaseToken string
	stage      pb.Stage
	claimEpoch int64
}

func echoOf(t *pb.StageTask) taskEcho {
	return taskEcho{leaseToken: t.GetLeaseToken(), stage: t.GetStage(), claimEpoch: t.GetClaimEpoch()}
}

func (e taskEcho) key() leaseKey { return leaseKey{token: e.leaseToken, epoch: e.claimEpoch} }

// wireVersion maps a version on the wire where 0 means 1 (older senders leave it unset).
func wireVersion(v int32) int32 {
	if v == 0 {
		return 1
	}
	return v
}

func uuidOf(b []byte) UUID {
	var u UUID
	if len(b) == len(u) {
		copy(u[:], b)
	}
	return u
}

// jsonOpt checks wire JSON without decoding it: nil when empty, an error naming what is
// malformed otherwise.
func jsonOpt(b []byte, what string) (json.RawMessage, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("malformed %s JSON", what)
	}
	return json.RawMessage(b), nil
}

func resourceFromPB(r *pb.Resource, what string) (Resource, error) {
	spec, err := jsonOpt(r.GetSpec(), what+" spec")
	if err != nil {
		return Resource{}, err
	}
	if spec == nil {
		spec = json.RawMessage("{}")
	}
	status, err := jsonOpt(r.GetStatus(), what+" status")
	if err != nil {
		return Resource{}, err
	}
	return Resource{
		ID:          uuidOf(r.GetId()),
		Kind:        r.GetKind(),
		KindVersion: wireVersion(r.GetKindVersion()),
		Name:        r.GetName(),
		OwnerID:     uuidOf(r.GetOwnerId()),
		RootID:      uuidOf(r.GetRootId()),
		Spec:        spec,
		Status:      status,
		Generation:  r.GetGeneration(),
		SyncedGen:   r.GetSyncedGen(),
		IsReady:     r.GetIsReady(),
		Phase:       r.GetPhase(),
		Labels:      r.GetLabels(),
		Finalizers:  r.GetFinalizers(),
	}, nil
}

func resourcesFromPB(rs []*pb.Resource, what string) ([]Resource, error) {
	out := make([]Resource, 0, len(rs))
	for _, r := range rs {
		res, err := resourceFromPB(r, what)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

func required(r *pb.Resource, what string) (Resource, error) {
	if r == nil {
		return Resource{}, fmt.Errorf("task payload has no %s", what)
	}
	return resourceFromPB(r, what)
}

// defaultTrigger is the trigger a stage implies when the broker did not say (older brokers).
func defaultTrigger(s Stage) string {
	switch s {
	case StageRollup:
		return TriggerChildrenSettled
	case StageDelete:
		return TriggerDeleteRequested
	case StageOperate:
		return TriggerOperation
	case StageReact:
		return TriggerReactor
	default:
		return TriggerSpecChange
	}
}

// requestFromTask decodes a task into a request. An error is a terminal failure message:
// the task is malformed (no reaction, a payload missing or not matching the stage, bad
// JSON). deadline is zero when the task has none; conn is the connection the task arrived
// on (nil outside the worker runtime), where a ROLLUP task's paged reads go.
func requestFromTask(task *pb.StageTask, cfg ProviderConfig, deadline time.Time, conn *brokerConn) (*ReactionRequest, error) {
	if task.GetReaction() == "" {
		return nil, fmt.Errorf("task has an empty reaction name")
	}
	stage := task.GetStage()
	if _, known := pb.Stage_name[int32(stage)]; !known || stage == StageUnspecified {
		return nil, fmt.Errorf("task has unknown stage %d", int32(stage))
	}
	override, err := jsonOpt(task.GetProviderConfig(), "provider_config override")
	if err != nil {
		return nil, err
	}
	trigger := task.GetTrigger()
	if trigger == "" {
		trigger = defaultTrigger(stage)
	}
	req := &ReactionRequest{
		Reaction:       task.GetReaction(),
		Stage:          stage,
		Trigger:        trigger,
		Kind:           task.GetKind(),
		KindVersion:    wireVersion(task.GetKindVersion()),
		Generation:     task.GetGeneration(),
		Attempt:        task.GetAttempt(),
		Deadline:       deadline,
		Config:         cfg,
		ConfigOverride: override,
		BundleOverride: task.GetProviderBundle(),
	}
	if task.GetRequest() == nil {
		return nil, fmt.Errorf("task has no payload for stage %s", stage)
	}
	mismatch := fmt.Errorf("task payload does not match stage %s", stage)
	switch p := task.GetRequest().(type) {
	case *pb.StageTask_ComposeReq:
		if stage != StageCompose {
			return nil, mismatch
		}
		if req.Resource, err = required(p.ComposeReq.GetRoot(), "root"); err != nil {
			return nil, err
		}
		if req.Observed, err = resourcesFromPB(p.ComposeReq.GetObserved(), "observed"); err != nil {
			return nil, err
		}
		req.dryRun = task.GetDryRun()
	case *pb.StageTask_WorkReq:
		if stage != StageWork {
			return nil, mismatch
		}
		if req.Resource, err = required(p.WorkReq.GetResource(), "resource"); err != nil {
			return nil, err
		}
		if req.Status, err = jsonOpt(p.WorkReq.GetStatus(), "status"); err != nil {
			return nil, err
		}
	case *pb.StageTask_RollupReq:
		if stage != StageRollup {
			return nil, mismatch
		}
		if req.Resource, err = required(p.RollupReq.GetRoot(), "root"); err != nil {
			return nil, err
		}
		if req.Descendants, err = resourcesFromPB(p.RollupReq.GetDescendants(), "descendant"); err != nil {
			return nil, err
		}
		req.DescendantsIncluded = p.RollupReq.GetDescendantsIncluded()
		req.Summary = summaryFromPB(p.RollupReq.GetSummary())
		req.Subtree = subtreeOf(task, conn)
		if req.Status, err = jsonOpt(p.RollupReq.GetStatus(), "status"); err != nil {
			return nil, err
		}
	case *pb.StageTask_DeleteReq:
		if stage != StageDelete {
			return nil, mismatch
		}
		if req.Resource, err = required(p.DeleteReq.GetResource(), "resource"); err != nil {
			return nil, err
		}
	case *pb.StageTask_OperateReq:
		if stage != StageOperate {
			return nil, mismatch
		}
		if req.Resource, err = required(p.OperateReq.GetResource(), "resource"); err != nil {
			return nil, err
		}
		op := p.OperateReq.GetOperation()
		if op == nil {
			return nil, fmt.Errorf("task payload has no operation")
		}
		input, err := jsonOpt(op.GetInput(), "operation input")
		if err != nil {
			return nil, err
		}
		req.Operation = &Operation{
			ResourceID:  uuidOf(op.GetResourceId()),
			Verb:        op.GetVerb(),
			Input:       input,
			Attempts:    op.GetAttempts(),
			RequestedBy: op.GetRequestedBy(),
		}
	case *pb.StageTask_ReactReq:
		if stage != StageReact {
			return nil, mismatch
		}
		if req.Resource, err = required(p.ReactReq.GetResource(), "resource"); err != nil {
			return nil, err
		}
		if _, known := pb.Transition_name[int32(p.ReactReq.GetTransition())]; known {
			req.Transition = p.ReactReq.GetTransition()
		}
		req.DedupToken = p.ReactReq.GetDedupToken()
	default:
		return nil, mismatch
	}
	return req, nil
}

// jsonBytes encodes an outcome part; nil stays absent (empty bytes on the wire).
func jsonBytes(v any, what string) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return nil, nil
		}
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%s is not valid JSON", what)
		}
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cannot encode %s: %w", what, err)
	}
	return b, nil
}

// specBytes encodes a child or config spec, which must be present on the wire.
func specBytes(v any, what string) ([]byte, error) {
	b, err := jsonBytes(v, what)
	if err == nil && b == nil {
		b = []byte("null")
	}
	return b, err
}

func conditionsToPB(cs []Condition) []*pb.Condition {
	out := make([]*pb.Condition, 0, len(cs))
	for _, c := range cs {
		out = append(out, &pb.Condition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	return out
}

func childToPB(c ChildSpec) (*pb.ChildSpec, error) {
	if c.KindVersion < 1 {
		return nil, fmt.Errorf("child %s/%s has kind_version %d; it must be at least 1", c.Kind, c.Name, c.KindVersion)
	}
	spec, err := specBytes(c.Spec, "child spec")
	if err != nil {
		return nil, err
	}
	return &pb.ChildSpec{Kind: c.Kind, Name: c.Name, Spec: spec, Labels: c.Labels, KindVersion: c.KindVersion}, nil
}

func edgeToPB(e DepEdge) *pb.DepEdge {
	values := make([]*pb.ValueFlow, 0, len(e.Values))
	for _, v := range e.Values {
		values = append(values, &pb.ValueFlow{DependentField: v.DependentField, SourceField: v.SourceField})
	}
	return &pb.DepEdge{
		From:   &pb.ResourceRef{Kind: e.From.Kind, Name: e.From.Name},
		To:     &pb.ResourceRef{Kind: e.To.Kind, Name: e.To.Name},
		Values: values,
	}
}

func configToPB(c ProviderConfigSpec) (*pb.ProviderConfigSpec, error) {
	if c.KindVersion < 1 {
		return nil, fmt.Errorf("provider config %s has kind_version %d; it must be at least 1", c.Name, c.KindVersion)
	}
	spec, err := specBytes(c.Spec, "provider config spec")
	if err != nil {
		return nil, err
	}
	return &pb.ProviderConfigSpec{Name: c.Name, Kind: c.Kind, IsDefault: c.IsDefault, Spec: spec, KindVersion: c.KindVersion}, nil
}

// completeFromOutcome encodes a successful outcome. An error is a terminal failure message
// (an outcome that cannot be encoded, e.g. a child without a version). A nil outcome is an
// empty one.
func completeFromOutcome(echo taskEcho, o *Outcome) (*pb.StageComplete, error) {
	if o == nil {
		o = &Outcome{}
	}
	out := &pb.StageComplete{LeaseToken: echo.leaseToken, Stage: echo.stage, ClaimEpoch: echo.claimEpoch}
	var err error
	if out.Output, err = jsonBytes(o.Output, "operation output"); err != nil {
		return nil, err
	}
	status, err := jsonBytes(o.Status, "status")
	if err != nil {
		return nil, err
	}
	conditions := conditionsToPB(o.Conditions)
	if echo.stage != StageCompose {
		out.Status, out.Conditions = status, conditions
		return out, nil
	}
	cr := &pb.ComposeResult{Status: status, Conditions: conditions}
	for _, c := range o.Children {
		pc, err := childToPB(c)
		if err != nil {
			return nil, err
		}
		cr.Desired = append(cr.Desired, pc)
	}
	for _, e := range o.Edges {
		cr.Edges = append(cr.Edges, edgeToPB(e))
	}
	for _, c := range o.Configs {
		pc, err := configToPB(c)
		if err != nil {
			return nil, err
		}
		cr.Configs = append(cr.Configs, pc)
	}
	out.Compose = cr
	return out, nil
}

// failComplete encodes a failure. An empty message is replaced: empty means success on
// the wire.
func failComplete(echo taskEcho, message string, terminal bool) *pb.StageComplete {
	if message == "" {
		message = "handler failed"
	}
	return &pb.StageComplete{
		LeaseToken:   echo.leaseToken,
		Stage:        echo.stage,
		ClaimEpoch:   echo.claimEpoch,
		ErrorMessage: message,
		Terminal:     terminal,
	}
}

// resultComplete maps a handler's return (or recovered panic) to the StageComplete to send.
func resultComplete(echo taskEcho, o *Outcome, err error) *pb.StageComplete {
	if err != nil {
		return failComplete(echo, err.Error(), IsTerminal(err))
	}
	c, encErr := completeFromOutcome(echo, o)
	if encErr != nil {
		return failComplete(echo, "cannot encode outcome: "+encErr.Error(), true)
	}
	return c
}
