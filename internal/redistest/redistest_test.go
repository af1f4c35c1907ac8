package redistest

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

func TestStandaloneAndCluster(t *testing.T) {
	Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		ctx := context.Background()
		// Keys on different slots must all work through the client.
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			if err := rdb.Set(ctx, "redistest:"+k, k, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if _, ok := ClusterClient(t).(*redis.ClusterClient); !ok {
		t.Fatal("cluster client is not a *redis.ClusterClient")
	}
	n, err := ClusterClient(t).ClusterInfo(context.Background()).Result()
	if err != nil || len(n) == 0 {
		t.Fatalf("cluster info: %v", err)
	}
}
