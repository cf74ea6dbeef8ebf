// Command kfake runs franz-go's fake Kafka cluster (github.com/twmb/franz-go/pkg/kfake) as a
// process, so that kafka-harness can start it as a peer target like any other broker: on
// loopback ports it is given, with the broker configs it is given, until SIGTERM.
//
// kfake is a library; its own command is not a module of its own that `go install` could
// fetch, so the harness keeps this small program (built by ci/fetch_vendor.sh into
// .harness/vendor/bin/kfake). The harness waits for the cluster to serve Metadata; the line
// printed once the listeners are open is for whoever reads the log.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

// configFlag collects repeated -config key=value flags: Kafka broker config keys kfake reads.
type configFlag map[string]string

func (f configFlag) String() string { return fmt.Sprint(map[string]string(f)) }

func (f configFlag) Set(text string) error {
	key, value, found := strings.Cut(text, "=")
	if !found || key == "" {
		return fmt.Errorf("want key=value, got %q", text)
	}
	f[key] = value
	return nil
}

// stderrLogger writes kfake's log lines at or above a level to stderr, which the harness
// sends to the target's log file.
type stderrLogger struct{ level kfake.LogLevel }

func (l stderrLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	if level > l.level {
		return
	}
	fmt.Fprintf(os.Stderr, "[%s] %s\n", level, fmt.Sprintf(format, args...))
}

var levels = map[string]kfake.LogLevel{
	"none": kfake.LogLevelNone, "error": kfake.LogLevelError, "warn": kfake.LogLevelWarn,
	"info": kfake.LogLevelInfo, "debug": kfake.LogLevelDebug,
}

// parsePorts turns "9092,9093" into one port per broker; kfake listens on 127.0.0.1 only.
func parsePorts(text string) ([]int, error) {
	if text == "" {
		return nil, fmt.Errorf("-ports is required: one loopback port per broker, e.g. -ports 9092,9093")
	}
	var ports []int
	for _, part := range strings.Split(text, ",") {
		port, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || port < 1 || port > 65535 {
			return nil, fmt.Errorf("bad port %q in -ports %q", part, text)
		}
		ports = append(ports, port)
	}
	return ports, nil
}

func main() {
	portList := flag.String("ports", "", "comma-separated loopback ports, one per broker")
	clusterID := flag.String("cluster-id", "kafka-harness-kfake", "the cluster id Metadata answers")
	partitions := flag.Int("default-partitions", 1,
		"partitions of a topic created without a count (Kafka's num.partitions, default 1)")
	autoCreate := flag.Bool("auto-create-topics", true,
		"create a topic a Metadata request asks to create (Kafka's auto.create.topics.enable, default true)")
	logLevel := flag.String("log-level", "warn", "none, error, warn, info or debug")
	configs := configFlag{}
	flag.Var(configs, "config", "a broker config key=value kfake reads (repeatable)")
	flag.Parse()

	ports, err := parsePorts(*portList)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(2)
	}
	level, known := levels[*logLevel]
	if !known {
		fmt.Fprintf(os.Stderr, "kfake: unknown -log-level %q\n", *logLevel)
		os.Exit(2)
	}
	opts := []kfake.Opt{
		kfake.Ports(ports...),
		kfake.ClusterID(*clusterID),
		kfake.DefaultNumPartitions(*partitions),
		kfake.WithLogger(stderrLogger{level}),
	}
	if *autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if len(configs) > 0 {
		opts = append(opts, kfake.BrokerConfigs(configs))
	}

	// Notified before the listeners open, so a SIGTERM that comes at once still stops cleanly.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake: could not start:", err)
		os.Exit(1)
	}
	fmt.Printf("kfake: %d brokers listening on %s\n", len(ports),
		strings.Join(cluster.ListenAddrs(), ","))
	received := <-stop
	cluster.Close()
	fmt.Printf("kfake: stopped on %s\n", received)
}
