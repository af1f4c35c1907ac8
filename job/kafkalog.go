package job

import (
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// groupLogger is the consumer group's logger. Leaving the group is logged
// at info, as is each generation's assignment (by the consumer), since an
// operator needs them to follow a rebalance; the group's other lines (per
// join, per commit) at debug, formatted only when debug is on.
func groupLogger(log *zap.Logger) kafka.Logger {
	return kafka.LoggerFunc(func(format string, args ...any) {
		switch {
		case strings.HasPrefix(format, "Leaving group"):
			log.Info("kafka consumer group left", zap.String("detail", strings.TrimSpace(fmt.Sprintf(format, args...))))
		case log.Core().Enabled(zapcore.DebugLevel):
			log.Debug(strings.TrimSpace(fmt.Sprintf(format, args...)))
		}
	})
}
