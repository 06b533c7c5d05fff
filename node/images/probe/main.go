// probe is the workload of the node tests: an HTTP server whose /ready answers 200 only when
// every expectation given in the environment holds inside the container, so a Ready pod proves
// them without kubectl exec. /checks returns the observations as JSON; they are also logged.
//
//	LISTEN                 address to serve on (default 0.0.0.0:8080)
//	EXPECT_UID             numeric uid the process must run as
//	EXPECT_READONLY_ROOT   "true": creating a file in / must fail with EROFS
//	EXPECT_NO_CAPS         "true": CapEff, CapPrm and CapBnd must be 0
//	EXPECT_SECCOMP         "true": the process must be under a seccomp filter (mode 2)
//	EXPECT_NO_NEW_PRIVS    "true": NoNewPrivs must be 1
//	EXPECT_FILES           colon-separated paths that must exist and be non-empty
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

type check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Pass bool   `json:"pass"`
}

func status() map[string]string {
	m := map[string]string{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

func run() []check {
	var cs []check
	st := status()
	add := func(name, want, got string) {
		cs = append(cs, check{name, want, got, want == got})
	}
	if v := os.Getenv("EXPECT_UID"); v != "" {
		add("uid", v, fmt.Sprint(os.Getuid()))
	}
	if os.Getenv("EXPECT_READONLY_ROOT") == "true" {
		f, err := os.Create("/probe-write-test")
		got := "writable"
		if err == nil {
			f.Close()
			os.Remove("/probe-write-test")
		} else if errors.Is(err, syscall.EROFS) {
			got = "EROFS"
		} else {
			got = err.Error()
		}
		add("readonly-root", "EROFS", got)
	}
	if os.Getenv("EXPECT_NO_CAPS") == "true" {
		for _, k := range []string{"CapEff", "CapPrm", "CapBnd"} {
			add(k, "0000000000000000", st[k])
		}
	}
	if os.Getenv("EXPECT_SECCOMP") == "true" {
		add("seccomp", "2", st["Seccomp"])
	}
	if os.Getenv("EXPECT_NO_NEW_PRIVS") == "true" {
		add("no-new-privs", "1", st["NoNewPrivs"])
	}
	if v := os.Getenv("EXPECT_FILES"); v != "" {
		for _, p := range strings.Split(v, ":") {
			got := "present"
			if fi, err := os.Stat(p); err != nil {
				got = err.Error()
			} else if fi.Size() == 0 && !fi.IsDir() {
				got = "empty"
			}
			add("file "+p, "present", got)
		}
	}
	return cs
}

func allPass(cs []check) bool {
	for _, c := range cs {
		if !c.Pass {
			return false
		}
	}
	return true
}

func main() {
	addr := os.Getenv("LISTEN")
	if addr == "" {
		addr = "0.0.0.0:8080"
	}
	cs := run()
	out, _ := json.Marshal(cs)
	log.Printf("checks pass=%v %s", allPass(cs), out)
	http.HandleFunc("/ready", func(w http.ResponseWriter, r *http.Request) {
		if !allPass(run()) {
			http.Error(w, "expectations not met, see /checks", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/checks", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"pass": allPass(run()), "checks": run(), "hostname": must(os.Hostname())})
	})
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		s := <-sigs
		log.Printf("got %v, exiting", s)
		os.Exit(0)
	}()
	log.Printf("listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}

func must(s string, _ error) string { return s }
