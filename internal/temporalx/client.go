// Package temporalx dials Temporal the one way every trainyard process does:
// OpenTelemetry tracing and metrics wired in, slog for SDK logs, optional TLS.
package temporalx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
)

// Options for Dial.
type Options struct {
	Address   string
	Namespace string
	Logger    *slog.Logger
	// TLS: a CA file for self-signed servers, a client cert/key pair for mTLS.
	TLSCAFile     string
	TLSCertFile   string
	TLSKeyFile    string
	TLSServerName string
	TLS           bool // TLS with system roots even without files
}

// Dial connects and waits until the server answers a health check, retrying
// for up to a minute so that processes may start in any order.
func Dial(ctx context.Context, o Options) (client.Client, error) {
	tracing, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	copts := client.Options{
		HostPort:       o.Address,
		Namespace:      o.Namespace,
		Interceptors:   []interceptor.ClientInterceptor{tracing},
		MetricsHandler: opentelemetry.NewMetricsHandler(opentelemetry.MetricsHandlerOptions{}),
	}
	if o.Logger != nil {
		copts.Logger = log.NewStructuredLogger(o.Logger.With("component", "temporal-sdk"))
	}
	if tc, err := o.tlsConfig(); err != nil {
		return nil, err
	} else if tc != nil {
		copts.ConnectionOptions.TLS = tc
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := client.DialContext(ctx, copts)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to temporal at %s (namespace %s): %w", o.Address, o.Namespace, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (o Options) tlsConfig() (*tls.Config, error) {
	if !o.TLS && o.TLSCAFile == "" && o.TLSCertFile == "" {
		return nil, nil
	}
	tc := &tls.Config{ServerName: o.TLSServerName, MinVersion: tls.VersionTLS12}
	if o.TLSCAFile != "" {
		pem, err := os.ReadFile(o.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal tls ca %s: no certificates found", o.TLSCAFile)
		}
		tc.RootCAs = pool
	}
	if o.TLSCertFile != "" || o.TLSKeyFile != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("temporal tls client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// ControlTaskQueue is where the control-plane worker polls: every
// workflow package starts its workflows there.
const ControlTaskQueue = "trainyard-control"
