package converge

// Condition is a Kubernetes-style condition reported by a handler.
type Condition struct {
	// Type is ConditionReady, ConditionSynced or a custom type; only Ready feeds health.
	Type string
	// Status is "True", "False" or "Unknown".
	Status string
	// Reason is a short CamelCase reason.
	Reason string
	// Message is human-readable.
	Message string
}

// NewCondition builds a condition of any type.
func NewCondition(typ, status, reason, message string) Condition {
	return Condition{Type: typ, Status: status, Reason: reason, Message: message}
}

// ReadyCondition builds a Ready condition, True or False.
func ReadyCondition(ready bool, reason, message string) Condition {
	status := "False"
	if ready {
		status = "True"
	}
	return NewCondition(ConditionReady, status, reason, message)
}

// ResourceRef names a resource by kind and name (an edge endpoint).
type ResourceRef struct {
	Kind string
	Name string
}

// Ref names a resource.
func Ref(kind, name string) ResourceRef { return ResourceRef{Kind: kind, Name: name} }

// ValueFlow copies one upstream status field into one dependent spec field (JSON pointers).
type ValueFlow struct {
	// DependentField is a JSON pointer into the dependent's spec.
	DependentField string
	// SourceField is a JSON pointer into the upstream's status.
	SourceField string
}

// Flow is a value flow from sourceField (upstream status) into dependentField (dependent
// spec).
func Flow(dependentField, sourceField string) ValueFlow {
	return ValueFlow{DependentField: dependentField, SourceField: sourceField}
}

// ChildSpec is one desired child of a composite.
type ChildSpec struct {
	Kind string
	// KindVersion must be at least 1.
	KindVersion int32
	Name        string
	// Spec is anything encoding/json can marshal (a map, a struct, a json.RawMessage).
	Spec   any
	Labels map[string]string
}

// NewChild is a child with no labels.
func NewChild(kind string, kindVersion int32, name string, spec any) ChildSpec {
	return ChildSpec{Kind: kind, KindVersion: kindVersion, Name: name, Spec: spec}
}

// WithLabel returns the child with one more label.
func (c ChildSpec) WithLabel(key, value string) ChildSpec {
	labels := make(map[string]string, len(c.Labels)+1)
	for k, v := range c.Labels {
		labels[k] = v
	}
	labels[key] = value
	c.Labels = labels
	return c
}

// DepEdge orders two children (From depends on To) and optionally carries value flows.
type DepEdge struct {
	// From is the dependent.
	From ResourceRef
	// To is the dependency (upstream).
	To ResourceRef
	// Values are fields copied from the upstream's status into the dependent's spec.
	Values []ValueFlow
}

// NewEdge is an edge where from waits for to, with no value flows.
func NewEdge(from, to ResourceRef) DepEdge { return DepEdge{From: from, To: to} }

// WithValue returns the edge with one more value flow.
func (e DepEdge) WithValue(flow ValueFlow) DepEdge {
	e.Values = append(append([]ValueFlow(nil), e.Values...), flow)
	return e
}

// ProviderConfigSpec is a provider config emitted by a composer (owned by the root).
type ProviderConfigSpec struct {
	// Name is the config's global name.
	Name string
	Kind string
	// KindVersion must be at least 1.
	KindVersion int32
	IsDefault   bool
	// Spec is anything encoding/json can marshal.
	Spec any
}

// Outcome is what a handler returns; the core applies only the parts the reaction's
// `emits` allows. A nil *Outcome with a nil error is an empty successful outcome.
//
// JSON parts (Status, Output, child and config specs) are anything encoding/json can
// marshal; nil means absent. An outcome that cannot be encoded is a terminal failure.
type Outcome struct {
	// Status is the observed status (last writer wins).
	Status any
	// Conditions are the reported conditions.
	Conditions []Condition
	// Children are the desired children (COMPOSE). An empty successful list prunes every
	// child: a composer that cannot compute its children must return an error instead.
	Children []ChildSpec
	// Edges are dependency edges between children (COMPOSE).
	Edges []DepEdge
	// Configs are provider configs owned by the root (COMPOSE).
	Configs []ProviderConfigSpec
	// Output is the operation's output (OPERATE).
	Output any
}

// StatusOutcome is an outcome carrying only a status.
func StatusOutcome(status any) *Outcome { return &Outcome{Status: status} }

// OutputOutcome is an outcome carrying only an operation output.
func OutputOutcome(output any) *Outcome { return &Outcome{Output: output} }

// WithStatus sets the status and returns the outcome.
func (o *Outcome) WithStatus(status any) *Outcome {
	o.Status = status
	return o
}

// WithOutput sets the operation output and returns the outcome.
func (o *Outcome) WithOutput(output any) *Outcome {
	o.Output = output
	return o
}

// WithCondition adds a condition and returns the outcome.
func (o *Outcome) WithCondition(c Condition) *Outcome {
	o.Conditions = append(o.Conditions, c)
	return o
}

// WithChild adds a desired child and returns the outcome.
func (o *Outcome) WithChild(c ChildSpec) *Outcome {
	o.Children = append(o.Children, c)
	return o
}

// WithEdge adds a dependency edge and returns the outcome.
func (o *Outcome) WithEdge(e DepEdge) *Outcome {
	o.Edges = append(o.Edges, e)
	return o
}

// WithConfig adds a provider config and returns the outcome.
func (o *Outcome) WithConfig(c ProviderConfigSpec) *Outcome {
	o.Configs = append(o.Configs, c)
	return o
}
