package wakeup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/drover-dev/drover/driver"
	"github.com/drover-dev/drover/internal/deflog"
)

// Defaults of NATSOptions.
const (
	DefaultStream        = "DROVER_WAKEUPS"
	DefaultSubjectPrefix = "drover.wakeup"
	DefaultMaxAge        = 15 * time.Minute
	DefaultMaxMsgs       = 1_000_000
	DefaultAckWait       = 30 * time.Second
	DefaultMaxDeliver    = 5
	DefaultFetchBatch    = 1
	DefaultPublishWait   = time.Second
)

// fetchWait bounds one pull request, so a subscriber notices a dead consumer or a
// closed transport within it even when no pointer arrives.
const fetchWait = 5 * time.Second

// fetchHeartbeat is the server's idle heartbeat on a pull; two missed ones end it
// with ErrNoHeartbeat. It must stay under fetchWait*0.9/2.
const fetchHeartbeat = time.Second

// NATSOptions configures NewNATS. Zero values take the defaults above.
type NATSOptions struct {
	// Stream is the JetStream stream holding pointers; SubjectPrefix its subjects,
	// <SubjectPrefix>.<queue token>. Every process of one deployment must agree on
	// both; tests use unique ones to isolate themselves.
	Stream        string
	SubjectPrefix string
	// MaxAge and MaxMsgs bound the stream: pointers nobody consumed are dropped,
	// oldest first, which only delays their jobs until a poll or the reconciler.
	MaxAge  time.Duration
	MaxMsgs int64
	// Replicas of the stream (clustered NATS); 0 means 1.
	Replicas int
	// MemoryStorage keeps the stream in memory: faster, but a NATS restart loses
	// the pointers in it (harmless, they are only hints). Default: file storage.
	MemoryStorage bool

	// AckWait is how long a delivered pointer may stay unacked before JetStream
	// delivers it again, to this or another subscriber. MaxDeliver bounds how often
	// one pointer is delivered; after that the stream keeps it, undelivered, until
	// MaxAge. A subscriber that receives a pointer must act on it well within AckWait.
	AckWait    time.Duration
	MaxDeliver int
	// FetchBatch is how many pointers one subscriber pulls per request. Pulled
	// pointers wait in the subscriber until its receiver takes them, so 1 (the
	// default) spreads pointers fairly across workers; more saves round trips.
	FetchBatch int
	// PublishWait bounds how long Publish waits for the stream to store its
	// pointers. A NATS server that stops answering (hung, or a stream that lost
	// its quorum) then costs an Enqueue or a reconciler pass this long, not until
	// the connection is declared dead; the pointers not stored are only hints.
	PublishWait time.Duration

	// Logger receives transient errors the transport recovers from. nil:
	// warnings and errors through slog.Default().
	Logger *slog.Logger
	// ConnectOptions are passed to nats.Connect after Drover's own (name, reconnect
	// forever), e.g. credentials or TLS.
	ConnectOptions []nats.Option

	// DropPublish, DuplicatePublish and DropAck are test-only fault injection:
	// drop a pointer instead of publishing it (a lost message), publish it twice
	// (a duplicate), or skip an ack (forcing redelivery after AckWait).
	DropPublish      func(Pointer) bool
	DuplicatePublish func(Pointer) bool
	DropAck          func(Message) bool
}

func (o *NATSOptions) setDefaults() {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = DefaultSubjectPrefix
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxMsgs <= 0 {
		o.MaxMsgs = DefaultMaxMsgs
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = DefaultMaxDeliver
	}
	if o.FetchBatch <= 0 {
		o.FetchBatch = DefaultFetchBatch
	}
	if o.PublishWait <= 0 {
		o.PublishWait = DefaultPublishWait
	}
	if o.Logger == nil {
		o.Logger = deflog.New()
	}
}

// NATS is a Transport over a NATS JetStream stream. Publish stores one message per
// pointer (the server acks each); every queue has one durable pull consumer with
// explicit acks, shared by all subscribers of that queue in every process, so each
// pointer goes to one subscriber, and again (to any) if it is not acked within
// AckWait. The stream uses work-queue retention: an acked pointer is deleted.
type NATS struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	opts NATSOptions
	log  *slog.Logger

	mu       sync.Mutex // guards isClosed and subs.Add against Close
	isClosed bool
	closed   chan struct{} // closed by Close: ends every subscription
	subs     sync.WaitGroup
}

var _ Transport = (*NATS)(nil)

// redactURL is a NATS URL, or a comma-separated list of them, without
// credentials: the user info is replaced whole, as NATS takes a user alone
// for a token (url.URL.Redacted leaves the user).
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, u := range parts {
		scheme, rest, ok := strings.Cut(u, "://")
		if !ok {
			scheme, rest = "", u
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = "xxxxx@" + rest[at+1:]
		}
		if ok {
			parts[i] = scheme + "://" + rest
		} else {
			parts[i] = rest
		}
	}
	return strings.Join(parts, ",")
}

// NewNATS connects to the NATS server at url and creates or updates the stream.
// The client reconnects on its own for as long as the NATS is open.
func NewNATS(ctx context.Context, url string, opts NATSOptions) (*NATS, error) {
	opts.setDefaults()
	if err := validPrefix(opts.SubjectPrefix); err != nil {
		return nil, err
	}
	log := opts.Logger.With("component", "wakeup.nats")
	connOpts := append([]nats.Option{
		nats.Name("drover"),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", redactURL(nc.ConnectedUrl()))
		}),
	}, opts.ConnectOptions...)
	nc, err := nats.Connect(url, connOpts...)
	if err != nil {
		return nil, fmt.Errorf("wakeup: connect to nats %s: %w", redactURL(url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("wakeup: jetstream: %w", err)
	}
	n := &NATS{nc: nc, js: js, opts: opts, log: log, closed: make(chan struct{})}
	if err := n.ensureStream(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return n, nil
}

func validPrefix(p string) error {
	if strings.ContainsAny(p, "*> \t\r\n") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, "..") {
		return fmt.Errorf("wakeup: subject prefix %q: must be a literal subject (no wildcards, spaces or empty tokens)", p)
	}
	return nil
}

func (n *NATS) ensureStream(ctx context.Context) error {
	storage := jetstream.FileStorage
	if n.opts.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	_, err := n.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        n.opts.Stream,
		Description: "Drover wake-up pointers: hints that a job may be claimable",
		Subjects:    []string{n.opts.SubjectPrefix + ".>"},
		// Work-queue retention deletes a pointer once acked, and guarantees one
		// consumer per subject, which is what "one durable per queue" needs.
		Retention: jetstream.WorkQueuePolicy,
		MaxAge:    n.opts.MaxAge,
		MaxMsgs:   n.opts.MaxMsgs,
		Discard:   jetstream.DiscardOld,
		Storage:   storage,
		Replicas:  n.opts.Replicas,
		// Deduplication stays off in effect (no Nats-Msg-Id is set): a duplicate
		// pointer is harmless, and the window must not exceed MaxAge.
		Duplicates: min(2*time.Minute, n.opts.MaxAge),
	})
	if err != nil {
		return fmt.Errorf("wakeup: create stream %s: %w", n.opts.Stream, err)
	}
	return nil
}

func (n *NATS) subject(queue string) string {
	return n.opts.SubjectPrefix + "." + queueToken(queue)
}

// payload is a pointer on the wire. The queue travels in the body as well as in
// the subject so that decoding does not depend on the subject encoding.
type payload struct {
	Queue string `json:"queue"`
	JobID int64  `json:"job_id,omitempty"`
}

// Publish stores the pointers in the stream, waiting for the server to ack each.
// It fails for an invalid queue name or if any pointer was not stored; the others
// may have been. If the stream is missing (deleted, or a memory stream lost in a
// NATS restart) it is recreated and the unstored pointers are sent once more.
func (n *NATS) Publish(ctx context.Context, ps []Pointer) error {
	msgs := make([]*nats.Msg, 0, len(ps))
	for _, p := range ps {
		if err := driver.ValidateName("queue", p.Queue); err != nil {
			return fmt.Errorf("wakeup: publish: %w", err)
		}
		if n.opts.DropPublish != nil && n.opts.DropPublish(p) {
			continue
		}
		data, err := json.Marshal(payload(p))
		if err != nil {
			return fmt.Errorf("wakeup: publish: %w", err)
		}
		msgs = append(msgs, &nats.Msg{Subject: n.subject(p.Queue), Data: data})
		if n.opts.DuplicatePublish != nil && n.opts.DuplicatePublish(p) {
			msgs = append(msgs, &nats.Msg{Subject: n.subject(p.Queue), Data: data})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, n.opts.PublishWait)
	defer cancel()
	failed, err := n.publish(ctx, msgs)
	if errors.Is(err, jetstream.ErrNoStreamResponse) && ctx.Err() == nil {
		if serr := n.ensureStream(ctx); serr != nil {
			return fmt.Errorf("wakeup: publish: %w (and %w)", err, serr)
		}
		n.log.Info("wake-up stream recreated", "stream", n.opts.Stream)
		failed, err = n.publish(ctx, failed)
	}
	if err != nil {
		return fmt.Errorf("wakeup: publish: %d of %d messages not stored: %w", len(failed), len(msgs), err)
	}
	return nil
}

// publish sends msgs without waiting between them, then waits for every ack. It
// returns the messages the server did not store and the first error.
func (n *NATS) publish(ctx context.Context, msgs []*nats.Msg) (failed []*nats.Msg, first error) {
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	for i, m := range msgs {
		f, err := n.js.PublishMsgAsync(m)
		if err != nil {
			failed, first = msgs[i:], err
			break
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			failed = append(failed, f.Msg())
			if first == nil {
				first = err
			}
		case <-ctx.Done():
			return msgs, ctx.Err()
		}
	}
	return failed, first
}

// Subscribe pulls pointers of the queues from their durable consumers (creating
// them if needed) until ctx ends or n closes. The channel is unbuffered and at most
// FetchBatch pointers per queue are pulled ahead of the receiver; one the receiver
// does not take within AckWait/2 is handed back (nak) so another subscriber can
// have it. Transient errors are logged and retried; they never end the channel.
// While the server cannot be reached Subscribe still succeeds at once, and the
// subscription starts delivering once it can; it fails only for an invalid queue
// name, a closed transport, or a consumer the server refuses.
func (n *NATS) Subscribe(ctx context.Context, queues []string) (<-chan Message, error) {
	if len(queues) == 0 {
		return nil, errors.New("wakeup: subscribe: no queues")
	}
	queues = uniq(queues)
	for _, q := range queues {
		if err := driver.ValidateName("queue", q); err != nil {
			return nil, fmt.Errorf("wakeup: subscribe: %w", err)
		}
	}
	// A consumer that cannot be created now because the server cannot be reached
	// is left to the subscription's pull loop, which creates it once the server
	// is back; only the server's refusal (a conflicting consumer, permissions)
	// fails Subscribe. Before, a Subscribe during an outage of NATS waited the
	// client's request timeout (5s) for each queue and failed, and a worker
	// starting then went without the transport's wake-ups until restarted.
	consumers := make([]jetstream.Consumer, len(queues))
	for i, q := range queues {
		if !n.nc.IsConnected() {
			continue
		}
		c, err := n.ensureConsumer(ctx, q)
		if err != nil {
			if refused(err) || ctx.Err() != nil {
				return nil, err
			}
			n.log.Warn("wake-up subscriber: create consumer failed; retrying in the background", "queue", q, "err", err)
			c = nil
		}
		consumers[i] = c
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.isClosed {
		return nil, errors.New("wakeup: subscribe: transport closed")
	}
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan Message)
	var wg sync.WaitGroup
	for i, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.pull(ctx, q, consumers[i], out)
		}()
	}
	n.subs.Add(1)
	go func() {
		defer n.subs.Done()
		select {
		case <-ctx.Done():
		case <-n.closed:
		}
		cancel()
		wg.Wait()
		close(out)
	}()
	return out, nil
}

func (n *NATS) ensureConsumer(ctx context.Context, queue string) (jetstream.Consumer, error) {
	c, err := n.js.CreateOrUpdateConsumer(ctx, n.opts.Stream, jetstream.ConsumerConfig{
		Durable:       consumerName(queue),
		Description:   "Drover wake-ups of queue " + queue,
		FilterSubject: n.subject(queue),
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       n.opts.AckWait,
		MaxDeliver:    n.opts.MaxDeliver,
	})
	if err != nil {
		return nil, fmt.Errorf("wakeup: consumer for queue %s: %w", queue, err)
	}
	return c, nil
}

// pull runs one queue's fetch loop. On an error it backs off and recreates the
// stream and consumer (a NATS restart with memory storage, or an operator, may
// have deleted them), so a subscription outlives anything but its context.
func (n *NATS) pull(ctx context.Context, queue string, c jetstream.Consumer, out chan<- Message) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if c == nil {
			var err error
			if err = n.ensureStream(ctx); err == nil {
				c, err = n.ensureConsumer(ctx, queue)
			}
			if err != nil {
				if ctx.Err() == nil {
					n.log.Warn("wake-up subscriber: recreate consumer failed", "queue", queue, "err", err)
				}
				c = nil
				if !waitFor(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
		}
		err := n.fetch(ctx, queue, c, out)
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		n.log.Warn("wake-up subscriber: fetch failed", "queue", queue, "err", err)
		if n.nc.IsClosed() {
			return
		}
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
			errors.Is(err, jetstream.ErrNoHeartbeat) {
			c = nil
		}
		if !waitFor(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// fetch makes one pull request and hands what it gets to out.
func (n *NATS) fetch(ctx context.Context, queue string, c jetstream.Consumer, out chan<- Message) error {
	fctx, cancel := context.WithTimeout(ctx, fetchWait)
	defer cancel()
	// Heartbeats are how a pull learns that its consumer is gone (deleted, or lost
	// with a memory stream in a NATS restart): the server just stops answering.
	batch, err := c.Fetch(n.opts.FetchBatch, jetstream.FetchContext(fctx), jetstream.FetchHeartbeat(fetchHeartbeat))
	if err != nil {
		return err
	}
	busy := false // the receiver let a pointer wait: hand back the rest at once
	for msg := range batch.Messages() {
		m, ok := n.message(queue, msg)
		if !ok {
			continue
		}
		if busy {
			_ = msg.Nak()
			continue
		}
		hold := time.NewTimer(n.opts.AckWait / 2)
		select {
		case out <- m:
		case <-hold.C:
			busy = true
			_ = msg.Nak()
		case <-ctx.Done():
			hold.Stop()
			// Handing back is only a courtesy: unacked, it returns after AckWait anyway.
			_ = msg.Nak()
			for msg := range batch.Messages() {
				_ = msg.Nak()
			}
			return ctx.Err()
		}
		hold.Stop()
	}
	// fctx's own deadline only ends a quiet pull (the server's expiry, set just
	// before it, normally does): not an error.
	if err := batch.Error(); err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// message decodes msg; a pointer that cannot be decoded is terminated, never
// redelivered, since no receiver could act on it.
func (n *NATS) message(queue string, msg jetstream.Msg) (Message, bool) {
	var p payload
	if err := json.Unmarshal(msg.Data(), &p); err != nil || p.Queue != queue {
		n.log.Warn("wake-up subscriber: dropping undecodable pointer", "subject", msg.Subject(), "err", err)
		_ = msg.Term()
		return Message{}, false
	}
	m := Message{Pointer: Pointer(p)}
	drop := n.opts.DropAck
	view := m
	m.ack = func() error {
		if drop != nil && drop(view) {
			return nil
		}
		if err := msg.Ack(); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return fmt.Errorf("wakeup: ack pointer to %s job %d: %w", p.Queue, p.JobID, err)
		}
		return nil
	}
	return m, true
}

// Close ends every subscription, waits for their channels to close, and closes
// the connection. Pointers pulled but not yet acked are redelivered after AckWait.
func (n *NATS) Close() error {
	n.mu.Lock()
	if n.isClosed {
		n.mu.Unlock()
		return nil
	}
	n.isClosed = true
	close(n.closed)
	n.mu.Unlock()
	n.subs.Wait()
	n.nc.Close()
	return nil
}

// refused reports whether err is the JetStream server's answer refusing a
// request, as against a failure to reach it. A missing stream, which the pull
// loop recreates, and a server-side unavailability (5xx) are not refusals.
func refused(err error) bool {
	var jerr jetstream.JetStreamError
	if !errors.As(err, &jerr) || jerr.APIError() == nil {
		return false
	}
	return !errors.Is(err, jetstream.ErrStreamNotFound) && jerr.APIError().Code < 500
}

// waitFor waits d or until ctx ends; it reports whether ctx is still alive.
func waitFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func uniq(ss []string) []string {
	seen := make(map[string]bool, len(ss))
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
