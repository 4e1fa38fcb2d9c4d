// Command krops-standin-controller is a STAND-IN for a Flux controller whose
// module the Go module proxy here does not serve, in the real-engine lane's
// images (tools/realengine/images.sh): notification-controller (the lane's
// helm-controller is krops-standin-helmcontroller, which reconciles). It
// answers the probes and ports the Flux manifests give the controller, so
// the Deployment the Flux Operator rolls out becomes available, and it
// reconciles nothing. As notification-controller it accepts the events the other
// controllers post and logs one line per event, which shows in the lane's
// pod logs that they reached it over the cluster network.
//
// The first argument names the controller it stands in for
// (--stands-in-for=NAME); every other argument is the real controller's and
// is ignored.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	name := "controller"
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--stands-in-for="); ok {
			name = v
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger := log.New(os.Stderr, "", log.LstdFlags|log.LUTC)
	logger.Printf("STAND-IN for %s (krops real-engine lane): answers probes, reconciles nothing", name)
	if err := serve(ctx, logger, name); err != nil {
		logger.Fatal(err)
	}
}

// serve runs the listeners the Flux manifests name until ctx ends.
func serve(ctx context.Context, logger *log.Logger, name string) error {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	health := http.NewServeMux()
	health.Handle("/healthz", ok)
	health.Handle("/readyz", ok)
	metrics := http.NewServeMux()
	metrics.Handle("/metrics", ok)
	servers := []*http.Server{
		{Addr: ":9440", Handler: health},
		{Addr: ":8080", Handler: metrics},
	}
	if name == "notification-controller" {
		servers = append(servers, &http.Server{Addr: ":9090", Handler: events(logger)})
	}
	errs := make(chan error, len(servers))
	for _, s := range servers {
		s.ReadHeaderTimeout = 10 * time.Second
		go func() {
			if err := s.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("%s: %w", s.Addr, err)
			}
		}()
	}
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return nil
}

// events accepts the events Flux controllers post (fluxcd/pkg/runtime
// events: an involvedObject, a reason, a message) and logs each one.
func events(logger *log.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var ev struct {
			InvolvedObject struct{ Kind, Namespace, Name string }
			Reason         string
			Reporting      string `json:"reportingController"`
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || json.Unmarshal(body, &ev) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		logger.Printf("event from %s: %s %s/%s %s", ev.Reporting, ev.InvolvedObject.Kind, ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, ev.Reason)
		w.WriteHeader(http.StatusAccepted)
	})
}
