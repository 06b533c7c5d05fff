// Command argocd-lua-health runs Argo CD resource health checks (health.lua) against their tests
// the way Argo CD runs them, without Argo CD: the same Lua VM (github.com/yuin/gopher-lua at the
// version Argo CD requires), the same libraries and sandbox, the same conversion of the object to
// the Lua global `obj`, and the same reading of the returned table.
//
//	argocd-lua-health [-open-libs=false] [-no-gvk-check] DIR...
//
// Each DIR is walked; every directory below it that holds a health.lua is laid out like Argo CD's
// resource_customizations/<group>/<Kind>/:
//
//	health.lua          the script; it returns a table hs with hs.status and hs.message
//	health_test.yaml    tests: [{inputPath: testdata/x.yaml, healthStatus: {status: ..., message: ...}}]
//	testdata/*.yaml     the objects
//
// One line is printed per test, then "N passed, N failed". Exit code 0: every test passed;
// 1: a status or message differs, the script failed, or an input could not be read; 2: usage
// error, or a directory without health_test.yaml, or no test at all.
//
// What is reproduced from Argo CD (util/lua/lua.go and its TestLuaHealthScript):
//   - objects and tests are read with sigs.k8s.io/yaml (YAML to JSON to encoding/json: numbers
//     are float64, only the first document counts, YAML 1.1 booleans such as an unquoted key n or
//     value off become false, keys of health_test.yaml match case-insensitively);
//   - the object becomes a Lua table: maps with RawSetH, arrays with Append (so a null in an
//     array is dropped), numbers LNumber, JSON null nil;
//   - with -open-libs (the default, as for Argo CD's built-in scripts and its test of them, and for
//     argocd-cm overrides with useOpenLibs: true) every gopher-lua library is open; with
//     -open-libs=false (an argocd-cm override without useOpenLibs) only package, base and table are
//     (no string, math or os global); in both modes package is opened a second time, which empties
//     package.loaded, so require("os") gives a table with only time and date;
//   - globals `obj` and `actionParams` (an empty table), a 1 s deadline, the chunk loaded with
//     LoadString (errors read "<string>:LINE: ..."), the stack trace dropped from runtime errors;
//   - the value on top of the stack is the result: nil gives an empty status; a table is encoded
//     with layeh.com/gopher-json and decoded with encoding/json into {status, message}, where a
//     type error (an empty table encodes as []) gives an empty status and a status outside
//     Healthy/Progressing/Degraded/Suspended/Missing/Unknown gives Unknown with the message
//     "Lua returned an invalid health status"; anything else is an error
//     "expect table output from Lua script, not TYPE";
//   - a test passes when status and message are both equal to the expected ones.
//
// Argo CD looks the script up by the object's group and kind, so a test fails, unless -no-gvk-check
// is given, when Argo CD would run another script on its object: the directory (the last two path
// elements, the last one for the core group; "_" matching anything, as in Argo CD's wildcard
// directories) does not match the object's group/Kind, or a sibling directory named exactly after
// it exists and takes precedence over this wildcard one.
//
// Known difference: the time and date of require("os") are gopher-lua's own,
// whereas Argo CD ships a copy of older ones: os.time(nil) returns the current time here (an error
// there) and os.date("!fmt", t) formats t in UTC here (local time there).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/yaml"
)

// healthStatus is the shape of Argo CD's health.HealthStatus (gitops-engine pkg/health).
type healthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

func (h healthStatus) String() string { return fmt.Sprintf("%s %q", h.Status, h.Message) }

// testFile is the shape of health_test.yaml as Argo CD's TestLuaHealthScript reads it.
type testFile struct {
	Tests []struct {
		InputPath    string       `json:"inputPath"`
		HealthStatus healthStatus `json:"healthStatus"`
	} `json:"tests"`
}

var validStatus = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

const (
	invalidHealthStatus = "Lua returned an invalid health status"
	scriptTimeout       = time.Second
)

func main() {
	openLibs := flag.Bool("open-libs", true, "open every Lua library (Argo CD built-in scripts, useOpenLibs: true); false: the sandbox of an argocd-cm override without useOpenLibs")
	noGVKCheck := flag.Bool("no-gvk-check", false, "run a test even when its object's group/Kind is not the directory's")
	showVersion := flag.Bool("version", false, "print the gopher-lua version and exit")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] DIR...\n\nRuns every health.lua below each DIR against its health_test.yaml, as Argo CD does.\nExit code 0: all passed; 1: a test failed; 2: usage or layout error.\n\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if *showVersion {
		fmt.Println(luaVersion())
		return
	}
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}

	var scriptDirs []string
	for _, root := range flag.Args() {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && d.Name() == "health.lua" {
				scriptDirs = append(scriptDirs, filepath.Dir(p))
			}
			return nil
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "argocd-lua-health: %v\n", err)
			os.Exit(2)
		}
	}
	if len(scriptDirs) == 0 {
		fmt.Fprintf(os.Stderr, "argocd-lua-health: no health.lua below %s\n", strings.Join(flag.Args(), " "))
		os.Exit(2)
	}

	passed, failed := 0, 0
	for _, dir := range scriptDirs {
		script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "argocd-lua-health: %v\n", err)
			os.Exit(2)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "argocd-lua-health: %s has a health.lua but no readable health_test.yaml: %v\n", dir, err)
			os.Exit(2)
		}
		var tests testFile
		if err := yaml.Unmarshal(raw, &tests); err != nil {
			fmt.Fprintf(os.Stderr, "argocd-lua-health: %s: %v\n", filepath.Join(dir, "health_test.yaml"), err)
			os.Exit(2)
		}
		if len(tests.Tests) == 0 {
			fmt.Fprintf(os.Stderr, "argocd-lua-health: %s lists no tests\n", filepath.Join(dir, "health_test.yaml"))
			os.Exit(2)
		}
		for _, t := range tests.Tests {
			name := filepath.Join(dir, t.InputPath)
			got, err := runTest(dir, t.InputPath, string(script), *openLibs, !*noGVKCheck)
			switch {
			case err != nil:
				failed++
				fmt.Printf("FAIL %s: error: %v (want %v)\n", name, err, t.HealthStatus)
			case *got != t.HealthStatus:
				failed++
				fmt.Printf("FAIL %s: got %v, want %v\n", name, *got, t.HealthStatus)
			default:
				passed++
				fmt.Printf("ok   %s: %v\n", name, *got)
			}
		}
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

func runTest(dir, inputPath, script string, openLibs, gvkCheck bool) (*healthStatus, error) {
	raw, err := os.ReadFile(filepath.Join(dir, inputPath))
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", inputPath, err)
	}
	if gvkCheck {
		if err := checkGroupKind(dir, obj); err != nil {
			return nil, err
		}
	}
	return executeHealthLua(obj, script, openLibs)
}

// checkGroupKind fails when Argo CD would not pick this directory's script for obj. Argo CD looks
// built-in scripts up by "group/Kind" ("Kind" for the core group) below resource_customizations/:
// that exact directory first, then a wildcard directory ("_" matching anything, as in
// _.crossplane.io/_). The root is taken to be the directory above this one's group (or Kind).
func checkGroupKind(dir string, obj map[string]any) error {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group := ""
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	key, root, pattern := kind, filepath.Dir(abs), filepath.Base(abs)
	if group != "" {
		key = group + "/" + kind
		root = filepath.Dir(root)
		pattern = filepath.Base(filepath.Dir(abs)) + "/" + pattern
	}
	exact := filepath.Join(root, filepath.FromSlash(key))
	if _, err := os.Stat(filepath.Join(exact, "health.lua")); err == nil {
		if exact == abs {
			return nil
		}
		return fmt.Errorf("the object is %q, for which Argo CD runs %s, not this script (use -no-gvk-check to run it anyway)", key, filepath.Join(exact, "health.lua"))
	}
	if ok, err := path.Match(strings.ReplaceAll(pattern, "_", "*"), key); err == nil && ok {
		return nil
	}
	return fmt.Errorf("the object is %q (apiVersion %q), Argo CD would not run this script on it (use -no-gvk-check to run it anyway)", key, apiVersion)
}

// executeHealthLua runs script with obj as Argo CD's VM.ExecuteHealthLua does.
func executeHealthLua(obj map[string]any, script string, openLibs bool) (*healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	// Argo CD (re)opens these three in every mode (reopening package empties package.loaded),
	// then its "safe os" (which registers under the name of the table library, loaded just
	// before, so it adds nothing), and preloads the safe os for require("os").
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return nil, err
		}
	}
	safeOs := safeOsFuncs()
	l.PreloadModule(lua.OsLibName, func(l *lua.LState) int {
		l.Push(l.SetFuncs(l.NewTable(), safeOs))
		return 1
	})

	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("actionParams", l.CreateTable(0, 0))
	l.SetGlobal("obj", toLua(l, obj))

	fn, err := l.LoadString(script)
	if err == nil {
		l.Push(fn)
		err = l.PCall(0, lua.MultRet, nil)
	}
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
		apiErr.StackTrace = ""
		err = apiErr
	}
	if err != nil {
		return nil, err
	}

	ret := l.Get(-1)
	switch ret.Type() {
	case lua.LTNil:
		return &healthStatus{}, nil
	case lua.LTTable:
	default:
		return nil, fmt.Errorf("expect table output from Lua script, not %s", ret.Type().String())
	}
	encoded, err := luajson.Encode(ret)
	if err != nil {
		return nil, err
	}
	hs := &healthStatus{}
	if err := json.Unmarshal(encoded, hs); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return &healthStatus{}, nil
		}
		return nil, err
	}
	if !validStatus[hs.Status] {
		return &healthStatus{Status: "Unknown", Message: invalidHealthStatus}, nil
	}
	return hs, nil
}

// toLua converts a decoded JSON value to Lua the way Argo CD's decodeValue does.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, e := range v {
			t.RawSetH(lua.LString(k), toLua(l, e))
		}
		return t
	}
	return lua.LNil
}

// safeOsFuncs returns gopher-lua's own os.time and os.date, the only two functions of the os
// library that Argo CD's sandbox offers.
func safeOsFuncs() map[string]lua.LGFunction {
	tmp := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer tmp.Close()
	tmp.Push(tmp.NewFunction(lua.OpenOs))
	tmp.Push(lua.LString(lua.OsLibName))
	tmp.Call(1, 1)
	osTable := tmp.Get(-1).(*lua.LTable)
	funcs := map[string]lua.LGFunction{}
	for _, name := range []string{"time", "date"} {
		funcs[name] = osTable.RawGetString(name).(*lua.LFunction).GFunction
	}
	return funcs
}

func luaVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/yuin/gopher-lua" {
				return "argocd-lua-health with github.com/yuin/gopher-lua " + d.Version
			}
		}
	}
	return "argocd-lua-health (gopher-lua version unknown)"
}
