package wakeup

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// queueToken encodes a queue name as one NATS subject token that is also a valid
// consumer name. Letters, digits, '-' and ':' stay as they are; every other byte,
// '.' and the escape '_' included, becomes "_XX" (hex). The encoding is injective,
// so "a.b" (a_2Eb) and "a_b" (a_5Fb) never share a subject, and a '.' can never add
// a level to the subject hierarchy or let one queue's subject match another's.
func queueToken(queue string) string {
	const hexdigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(queue))
	for i := 0; i < len(queue); i++ {
		c := queue[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == ':' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteByte(hexdigits[c>>4])
		b.WriteByte(hexdigits[c&0xF])
	}
	return b.String()
}

// maxConsumerName keeps durable names well under the server's limit on names
// (255 bytes), which a 128-character queue of dots (384 bytes encoded) exceeds.
const maxConsumerName = 200

// consumerName is the durable pull consumer shared by every subscriber of queue.
func consumerName(queue string) string {
	name := "queue_" + queueToken(queue)
	if len(name) <= maxConsumerName {
		return name
	}
	sum := sha256.Sum256([]byte(queue))
	return name[:maxConsumerName-33] + "_" + hex.EncodeToString(sum[:16])
}
