package wakeup

import "context"

// Pointer says a job may be claimable: job JobID of Queue, or, when JobID is 0,
// some job of Queue. It carries no other state, so acting on a stale one is harmless.
type Pointer struct {
	Queue string
	JobID int64 // 0: any claimable job of Queue
}

// Message is a received Pointer. Ack it after the claim attempt, whether or not the
// claim got the job: the job row is the truth. A transport that redelivers (NATS)
// delivers an unacked message again after its ack wait; one that does not (the
// driver's) ignores Ack.
type Message struct {
	Pointer
	ack func() error
}

// Ack tells the transport the pointer was acted on, so it is not delivered again.
// It is safe to call on a zero Message and more than once.
func (m Message) Ack() error {
	if m.ack == nil {
		return nil
	}
	return m.ack()
}

// Transport publishes and delivers pointers. Implementations are safe for
// concurrent use. None promises delivery: receivers must also poll.
type Transport interface {
	// Publish sends the pointers. A nil error means the transport accepted them
	// (for NATS: the server stored them); it never means a worker got them.
	Publish(ctx context.Context, ps []Pointer) error
	// Subscribe delivers pointers for the given queues, and only those, until ctx
	// ends or the transport closes; then the channel closes. Subscribers of the same
	// queue may share pointers (each goes to one of them) or each get every pointer,
	// depending on the transport; either is correct because pointers are only hints.
	Subscribe(ctx context.Context, queues []string) (<-chan Message, error)
	// Close releases the transport's own resources (not a driver it wraps) and ends
	// its subscriptions.
	Close() error
}
