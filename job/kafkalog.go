package job

import (
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
)

// groupLogger is the Kafka reader's logger. The consumer group's
// membership changes (partitions assigned at each generation, leaving the
// group) are logged at info, since an operator needs them to follow a
// rebalance; the reader's other lines (per commit, per fetch loop) at
// debug.
func groupLogger(log *zap.Logger) kafka.Logger {
	return kafka.LoggerFunc(func(format string, args ...any) {
		msg := strings.TrimSpace(fmt.Sprintf(format, args...))
		switch {
		case strings.HasPrefix(format, "subscribed to topics and partitions"):
			log.Info("kafka partitions assigned", zap.String("assignment", strings.TrimPrefix(msg, "subscribed to topics and partitions: ")))
		case strings.HasPrefix(format, "Leaving group"):
			log.Info("kafka consumer group left", zap.String("detail", msg))
		default:
			log.Debug(msg)
		}
	})
}
