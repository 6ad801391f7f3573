package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/compile"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Decisions run the bundle compiled to WebAssembly by OPA's own compiler
// (what `opa build -t wasm` produces) inside wazero. OPA's interpreter
// (topdown) spends most of a decision walking rules and reading data;
// the compiled module does the same work several times faster (see
// docs/scheduling.md). The interpreter stays the reference: tests check
// that both give the same decision, and a bundle that cannot be compiled
// to Wasm is decided by the interpreter.
//
// The module speaks OPA's Wasm ABI (docs: "OPA WebAssembly"): it imports
// its memory and a few host functions from a module named "env", and
// exports an evaluation context API. Each VM keeps the bundle's data and
// the latest cluster and usage documents parsed in its memory below an
// eval heap mark; a decision resets the heap to the mark, parses only the
// work (a few hundred bytes) and links the cached documents into its
// input.

const (
	// wasmEntrypoint is the one rule the module exports: everything a
	// decision reads, so that deny is evaluated once.
	wasmEntrypoint = "trainyard_decision/decision"
	wasmModulePath = "trainyard_decision.rego"
	wasmModuleSrc  = `package trainyard_decision

decision := {
	"allow": data.trainyard.admission.allow,
	"deny": data.trainyard.admission.deny,
	"priority": [p | p := data.trainyard.admission.priority],
}
`
	// wasmMaxPages bounds one VM's memory (64 KiB pages): 128 MiB.
	wasmMaxPages = 2048
)

// compiledModules keeps the compilation caches of the last few modules,
// so that engines for the same bundle (the admission service and a dry run
// of the current bundle, tests) compile it to machine code once. A cache
// dropped from here is freed with the last engine using it: compiled code
// must not pile up with every proposed bundle a dry run compiles.
var compiledModules = struct {
	sync.Mutex
	order  [][32]byte
	caches map[[32]byte]wazero.CompilationCache
}{caches: map[[32]byte]wazero.CompilationCache{}}

const compiledModulesKept = 4

func compilationCache(module []byte) wazero.CompilationCache {
	key := sha256.Sum256(module)
	c := &compiledModules
	c.Lock()
	defer c.Unlock()
	if cache, ok := c.caches[key]; ok {
		return cache
	}
	if len(c.order) == compiledModulesKept {
		delete(c.caches, c.order[0])
		c.order = c.order[1:]
	}
	cache := wazero.NewCompilationCache()
	c.caches[key] = cache
	c.order = append(c.order, key)
	return cache
}

// wasmEvaluator decides with one bundle's Wasm module. VMs are not safe for
// concurrent use, so it keeps up to GOMAXPROCS idle ones and makes more on
// demand.
type wasmEvaluator struct {
	module []byte // policy.wasm
	data   []byte // the bundle's data document, JSON
	cache  wazero.CompilationCache
	idle   chan *wasmVM
}

// newWasmEvaluator compiles the bundle and starts one VM, so that a module
// the host cannot run (an ABI it does not speak, a builtin topdown lacks)
// is refused here rather than at the first decision.
func newWasmEvaluator(ctx context.Context, b Bundle, data map[string]any) (*wasmEvaluator, error) {
	mod, err := compileWasm(ctx, b, data)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	w := &wasmEvaluator{module: mod, data: raw, cache: compilationCache(mod), idle: make(chan *wasmVM, runtime.GOMAXPROCS(0))}
	vm, err := w.newVM(ctx)
	if err != nil {
		return nil, err
	}
	w.put(vm)
	return w, nil
}

// compileWasm plans the bundle's policy modules (tests excluded) plus the
// entrypoint module and compiles them to one Wasm module.
func compileWasm(ctx context.Context, b Bundle, data map[string]any) ([]byte, error) {
	paths := make([]string, 0, len(b.Modules))
	for p := range b.Modules {
		if !IsTest(p) {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	files := make([]bundle.ModuleFile, 0, len(paths)+1)
	add := func(path, src string) error {
		m, err := ast.ParseModuleWithOpts(path, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		files = append(files, bundle.ModuleFile{Path: path, URL: path, Raw: []byte(src), Parsed: m})
		return nil
	}
	for _, p := range paths {
		if err := add(p, b.Modules[p]); err != nil {
			return nil, err
		}
	}
	if err := add(wasmModulePath, wasmModuleSrc); err != nil {
		return nil, err
	}
	c := compile.New().
		WithTarget(compile.TargetWasm).
		WithEntrypoints(wasmEntrypoint).
		WithRegoVersion(ast.RegoV1).
		WithBundle(&bundle.Bundle{Modules: files, Data: data})
	if err := c.Build(ctx); err != nil {
		return nil, fmt.Errorf("compile to wasm: %w", err)
	}
	mods := c.Bundle().WasmModules
	if len(mods) != 1 {
		return nil, fmt.Errorf("compile to wasm: %d modules, want 1", len(mods))
	}
	return mods[0].Raw, nil
}

func (w *wasmEvaluator) get(ctx context.Context) (*wasmVM, error) {
	select {
	case vm := <-w.idle:
		return vm, nil
	default:
		return w.newVM(ctx)
	}
}

// put keeps a VM for the next decision; a broken one is closed.
func (w *wasmEvaluator) put(vm *wasmVM) {
	if vm.broken {
		vm.close()
		return
	}
	select {
	case w.idle <- vm:
	default:
		vm.close()
	}
}

// wasmInput is one decision's input: the work (and placement) as a JSON
// object, and the cluster and usage documents with their content hashes.
type wasmInput struct {
	rest           []byte
	cluster, usage *document
}

// eval runs the decision entrypoint and returns its value; nil when it is
// undefined.
func (w *wasmEvaluator) eval(ctx context.Context, in wasmInput) (*verdict, error) {
	vm, err := w.get(ctx)
	if err != nil {
		return nil, err
	}
	defer w.put(vm)
	out, err := vm.eval(ctx, in)
	if err != nil {
		vm.broken = true // a failed call can leave the module mid-update
		return nil, err
	}
	return decodeResult(out)
}

// wasmVM is one instance of the module with its own runtime (the module
// imports its memory from a module named "env", which a runtime holds once).
type wasmVM struct {
	rt     wazero.Runtime
	mod    api.Module
	mem    api.Memory
	broken bool

	malloc, jsonParse, valueParse, jsonDump, valueDump api.Function
	heapGet, heapSet, addPath                          api.Function
	ctxNew, ctxInput, ctxData, ctxEntrypoint, run      api.Function
	ctxResult                                          api.Function

	entrypoint uint64
	builtins   map[uint32]wasmBuiltin
	memo       map[string]memoResult
	// stack carries every call's parameters and results (the ABI's
	// functions take at most three).
	stack [4]uint64

	dataAddr, pathCluster, pathUsage, pathNodes, pathUsed uint32
	// dataEnd is the heap mark after the data; docsEnd the one after the
	// cluster document as last parsed whole; usageAt the one after the
	// node patches since, where the usage document is parsed; evalHeap the
	// one after it, where every decision starts (see cacheDocuments).
	dataEnd, docsEnd, usageAt, evalHeap uint32
	cluster, usage                      *document
	clusterAddr, usageAddr              uint32
	// nodeAddrs are the node objects of the cached cluster document, in
	// order; nil when they could not be read (no patching then).
	nodeAddrs []uint32
	// parsedWhole counts parseDocuments calls (tests read it).
	parsedWhole int
}

// wasmPatchBytes bounds the heap that patched documents leave behind (the
// values they replace are freed, but the heap reset before each decision
// forgets freed blocks): past it, the next change parses the documents
// whole again. A node's patch takes ~320 bytes, so that is one change in
// ~3,000 on a fleet where one node changes at a time.
const wasmPatchBytes = 1 << 20

type wasmBuiltin struct {
	name string
	fn   topdown.BuiltinFunc
	// pure builtins' results are kept by their arguments' text (memo):
	// a deny reason formatted again for the same values costs a lookup
	// instead of a parse, a format and a marshal (~15 µs).
	pure bool
}

// pureBuiltins are the host builtins whose result depends on their
// arguments alone.
var pureBuiltins = map[string]bool{"sprintf": true}

// builtinMemoSize bounds each VM's memo of pure builtin results; when
// full it starts again empty.
const builtinMemoSize = 512

// memoResult is a pure builtin's result as the module parses it.
type memoResult struct {
	raw  []byte
	json bool
}

func (w *wasmEvaluator) newVM(ctx context.Context) (*wasmVM, error) {
	cfg := wazero.NewRuntimeConfig().WithCompilationCache(w.cache).WithMemoryLimitPages(wasmMaxPages)
	vm := &wasmVM{rt: wazero.NewRuntimeWithConfig(ctx, cfg)}
	if err := vm.start(ctx, w.module, w.data); err != nil {
		vm.close()
		return nil, fmt.Errorf("start wasm policy: %w", err)
	}
	return vm, nil
}

func (vm *wasmVM) close() { _ = vm.rt.Close(context.Background()) }

func (vm *wasmVM) start(ctx context.Context, module, data []byte) error {
	compiled, err := vm.rt.CompileModule(ctx, module)
	if err != nil {
		return err
	}
	minPages := uint32(2)
	for _, m := range compiled.ImportedMemories() {
		minPages = max(minPages, m.Min())
	}
	if err := vm.hostModule(ctx); err != nil {
		return err
	}
	if _, err := vm.rt.InstantiateWithConfig(ctx, envModule(minPages), wazero.NewModuleConfig().WithName("env")); err != nil {
		return fmt.Errorf("env module: %w", err)
	}
	vm.mod, err = vm.rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName("policy"))
	if err != nil {
		return err
	}
	vm.mem = vm.mod.Memory()
	if g := vm.mod.ExportedGlobal("opa_wasm_abi_version"); g == nil || g.Get() != 1 {
		return errors.New("not an OPA Wasm ABI 1.x module")
	}
	fns := map[string]*api.Function{
		"opa_malloc": &vm.malloc, "opa_json_parse": &vm.jsonParse, "opa_value_parse": &vm.valueParse,
		"opa_json_dump": &vm.jsonDump, "opa_value_dump": &vm.valueDump,
		"opa_heap_ptr_get": &vm.heapGet, "opa_heap_ptr_set": &vm.heapSet, "opa_value_add_path": &vm.addPath,
		"opa_eval_ctx_new": &vm.ctxNew, "opa_eval_ctx_set_input": &vm.ctxInput, "opa_eval_ctx_set_data": &vm.ctxData,
		"opa_eval_ctx_set_entrypoint": &vm.ctxEntrypoint, "eval": &vm.run, "opa_eval_ctx_get_result": &vm.ctxResult,
	}
	for name, f := range fns {
		if *f = vm.mod.ExportedFunction(name); *f == nil {
			return fmt.Errorf("module does not export %s", name)
		}
	}
	if err := vm.link(ctx); err != nil {
		return err
	}
	if vm.dataAddr, err = vm.parse(ctx, data); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if vm.pathCluster, err = vm.parse(ctx, []byte(`["cluster"]`)); err != nil {
		return err
	}
	if vm.pathUsage, err = vm.parse(ctx, []byte(`["usage"]`)); err != nil {
		return err
	}
	if vm.pathNodes, err = vm.parse(ctx, []byte(`["nodes"]`)); err != nil {
		return err
	}
	if vm.pathUsed, err = vm.parse(ctx, []byte(`["used"]`)); err != nil {
		return err
	}
	if vm.dataEnd, err = vm.call(ctx, vm.heapGet); err != nil {
		return err
	}
	vm.evalHeap = vm.dataEnd
	return nil
}

// link resolves the entrypoint and the builtins the module leaves to the
// host (sprintf, for one) to topdown's implementations.
func (vm *wasmVM) link(ctx context.Context) error {
	var eps map[string]uint32
	if err := vm.exported(ctx, "entrypoints", &eps); err != nil {
		return err
	}
	id, ok := eps[wasmEntrypoint]
	if !ok {
		return fmt.Errorf("module lacks entrypoint %s (has %v)", wasmEntrypoint, eps)
	}
	vm.entrypoint = uint64(id)
	var bis map[string]uint32
	if err := vm.exported(ctx, "builtins", &bis); err != nil {
		return err
	}
	vm.builtins = make(map[uint32]wasmBuiltin, len(bis))
	for name, id := range bis {
		fn := topdown.GetBuiltin(name)
		if fn == nil {
			return fmt.Errorf("builtin %s has no host implementation", name)
		}
		vm.builtins[id] = wasmBuiltin{name: name, fn: fn, pure: pureBuiltins[name]}
	}
	return nil
}

// exported calls a no-argument export returning a value and decodes it.
func (vm *wasmVM) exported(ctx context.Context, name string, out any) error {
	f := vm.mod.ExportedFunction(name)
	if f == nil {
		return fmt.Errorf("module does not export %s", name)
	}
	addr, err := vm.call(ctx, f)
	if err != nil {
		return err
	}
	s, err := vm.dump(ctx, vm.jsonDump, addr)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(s, out); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// eval decides one input and returns the result set as JSON. The returned
// bytes live in the VM's memory until its next call.
func (vm *wasmVM) eval(ctx context.Context, in wasmInput) ([]byte, error) {
	if in.cluster != vm.cluster || in.usage != vm.usage {
		if err := vm.cacheDocuments(ctx, in); err != nil {
			return nil, err
		}
	}
	if _, err := vm.call(ctx, vm.heapSet, uint64(vm.evalHeap)); err != nil {
		return nil, err
	}
	input, err := vm.parse(ctx, in.rest)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	for _, link := range [...][2]uint32{{vm.pathCluster, vm.clusterAddr}, {vm.pathUsage, vm.usageAddr}} {
		rc, err := vm.call(ctx, vm.addPath, uint64(input), uint64(link[0]), uint64(link[1]))
		if err != nil {
			return nil, err
		}
		if rc != 0 {
			return nil, fmt.Errorf("link input document: error %d", rc)
		}
	}
	ec, err := vm.call(ctx, vm.ctxNew)
	if err == nil {
		_, err = vm.call(ctx, vm.ctxInput, uint64(ec), uint64(input))
	}
	if err == nil {
		_, err = vm.call(ctx, vm.ctxData, uint64(ec), uint64(vm.dataAddr))
	}
	if err == nil {
		_, err = vm.call(ctx, vm.ctxEntrypoint, uint64(ec), vm.entrypoint)
	}
	if err == nil {
		_, err = vm.call(ctx, vm.run, uint64(ec))
	}
	var res uint32
	if err == nil {
		res, err = vm.call(ctx, vm.ctxResult, uint64(ec))
	}
	if err != nil {
		return nil, err
	}
	return vm.dump(ctx, vm.jsonDump, res)
}

// cacheDocuments brings the VM's cluster and usage documents up to date.
// Placements starting and ending change only the nodes' used resources:
// those are patched in (a node's used object parsed and put in place takes
// ~2 µs, parsing the seed-002 fleet's 5 KB document ~50 µs). The usage
// document is parsed last, on top, so that a new one (with live usage,
// every decision has one: ~4 KB of values) takes the place of the last
// and leaves no garbage behind. Anything else, or too much garbage from
// earlier node patches, parses both documents whole above the data,
// discarding the previous ones.
func (vm *wasmVM) cacheDocuments(ctx context.Context, in wasmInput) error {
	if vm.nodeAddrs != nil && vm.usageAt-vm.docsEnd < wasmPatchBytes {
		if changed, ok := usedChanges(vm.cluster.cluster, in.cluster.cluster); ok {
			return vm.patchDocuments(ctx, in, changed)
		}
	}
	return vm.parseDocuments(ctx, in)
}

func (vm *wasmVM) parseDocuments(ctx context.Context, in wasmInput) error {
	if _, err := vm.call(ctx, vm.heapSet, uint64(vm.dataEnd)); err != nil {
		return err
	}
	vm.cluster, vm.usage, vm.nodeAddrs = nil, nil, nil
	vm.parsedWhole++
	// The nodes array is parsed on its own and linked in, so that its
	// address is known and each node's can be read from it.
	cluster, end := clusterJSONSplit(*in.cluster.cluster)
	nodes := cluster[len(`{"nodes":`):end]
	cluster[end] = '{'
	nodesAddr, err := vm.parse(ctx, nodes)
	if err != nil {
		return fmt.Errorf("cluster nodes: %w", err)
	}
	if vm.clusterAddr, err = vm.parse(ctx, cluster[end:]); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := vm.addPathAt(ctx, vm.clusterAddr, vm.pathNodes, nodesAddr); err != nil {
		return fmt.Errorf("cluster nodes: %w", err)
	}
	nodeAddrs := vm.objectsOf(nodesAddr, len(in.cluster.cluster.Nodes))
	if vm.docsEnd, err = vm.call(ctx, vm.heapGet); err != nil {
		return err
	}
	vm.usageAt = vm.docsEnd
	if err := vm.parseUsage(ctx, in.usage); err != nil {
		return err
	}
	vm.cluster, vm.usage, vm.nodeAddrs = in.cluster, in.usage, nodeAddrs
	return nil
}

// parseUsage parses the usage document at the heap mark usageAt, in place
// of the last one; decisions start above it.
func (vm *wasmVM) parseUsage(ctx context.Context, d *document) error {
	_, err := vm.call(ctx, vm.heapSet, uint64(vm.usageAt))
	var usage []byte
	if err == nil {
		usage, err = d.json()
	}
	if err == nil {
		vm.usageAddr, err = vm.parse(ctx, usage)
	}
	if err == nil {
		vm.evalHeap, err = vm.call(ctx, vm.heapGet)
	}
	if err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	return nil
}

// objectsOf reads the elements of the array value at addr, expecting n
// objects. The ABI has no export for this, so it reads the array as OPA's
// Wasm library lays it out (value.h: a type byte, then a pointer to
// {index, value} pointer pairs and the length); on any mismatch (another
// layout after an OPA upgrade) it returns nil, and the VM then parses
// changed clusters whole. TestPatchedClusterIsParsedCluster checks the
// patched documents against parsed ones.
func (vm *wasmVM) objectsOf(addr uint32, n int) []uint32 {
	const opaArray, opaObject = 5, 6
	typ, ok1 := vm.mem.ReadByte(addr)
	elems, ok2 := vm.mem.ReadUint32Le(addr + 4)
	length, ok3 := vm.mem.ReadUint32Le(addr + 8)
	if !ok1 || !ok2 || !ok3 || typ != opaArray || length != uint32(n) {
		return nil
	}
	out := make([]uint32, n)
	for i := range out {
		v, ok := vm.mem.ReadUint32Le(elems + uint32(8*i) + 4)
		if !ok {
			return nil
		}
		if typ, ok := vm.mem.ReadByte(v); !ok || typ != opaObject {
			return nil
		}
		out[i] = v
	}
	return out
}

// addPathAt sets the value at path (an array of keys) under the object at
// base to v.
func (vm *wasmVM) addPathAt(ctx context.Context, base, path, v uint32) error {
	rc, err := vm.call(ctx, vm.addPath, uint64(base), uint64(path), uint64(v))
	if err != nil {
		return err
	}
	if rc != 0 {
		return fmt.Errorf("add path: error %d", rc)
	}
	return nil
}

// patchDocuments replaces the used object of each changed node (through
// the ABI's opa_value_add_path) and parses a changed usage document. Node
// patches go above the earlier ones, where the usage document was, which
// is then parsed again above them.
func (vm *wasmVM) patchDocuments(ctx context.Context, in wasmInput, changed []int) error {
	if _, err := vm.call(ctx, vm.heapSet, uint64(vm.usageAt)); err != nil {
		return err
	}
	usageChanged := in.usage != vm.usage || len(changed) > 0
	vm.cluster, vm.usage = nil, nil // until patched: a failure breaks the VM
	var buf [64]byte
	for _, i := range changed {
		used, err := vm.parse(ctx, appendUsedJSON(buf[:0], in.cluster.cluster.Nodes[i].Used))
		if err == nil {
			err = vm.addPathAt(ctx, vm.nodeAddrs[i], vm.pathUsed, used)
		}
		if err != nil {
			return fmt.Errorf("cluster: node %d used: %w", i, err)
		}
	}
	var err error
	if vm.usageAt, err = vm.call(ctx, vm.heapGet); err != nil {
		return err
	}
	if usageChanged {
		if err := vm.parseUsage(ctx, in.usage); err != nil {
			return err
		}
	}
	vm.cluster, vm.usage = in.cluster, in.usage
	return nil
}

// parse copies JSON (or Rego value text, with parser = valueParse) into the
// heap and parses it to a value.
func (vm *wasmVM) parse(ctx context.Context, raw []byte) (uint32, error) {
	return vm.parseWith(ctx, vm.jsonParse, raw)
}

func (vm *wasmVM) parseWith(ctx context.Context, parser api.Function, raw []byte) (uint32, error) {
	p, err := vm.call(ctx, vm.malloc, uint64(len(raw)))
	if err != nil {
		return 0, err
	}
	if !vm.mem.Write(p, raw) {
		return 0, fmt.Errorf("write %d bytes at %d: out of memory", len(raw), p)
	}
	addr, err := vm.call(ctx, parser, uint64(p), uint64(len(raw)))
	if err != nil {
		return 0, err
	}
	if addr == 0 {
		return 0, fmt.Errorf("module could not parse %.60q", raw)
	}
	return addr, nil
}

// dump serialises the value at addr (JSON, or Rego text with valueDump)
// and returns the bytes, which stay valid until the VM's next call.
func (vm *wasmVM) dump(ctx context.Context, dumper api.Function, addr uint32) ([]byte, error) {
	s, err := vm.call(ctx, dumper, uint64(addr))
	if err != nil {
		return nil, err
	}
	buf, ok := vm.mem.Read(s, vm.mem.Size()-s)
	if !ok {
		return nil, fmt.Errorf("dump at %d: outside memory", s)
	}
	n := bytes.IndexByte(buf, 0)
	if n < 0 {
		return nil, fmt.Errorf("dump at %d: unterminated", s)
	}
	return buf[:n:n], nil
}

// call passes the arguments and takes the result through the VM's stack
// buffer: Function.Call allocates a result slice per call, a dozen per
// decision. The result means nothing for a function that returns none. A
// host builtin may call in again while the outer call runs; that is safe,
// as wazero reads the parameters on entry and writes the results on return.
func (vm *wasmVM) call(ctx context.Context, f api.Function, args ...uint64) (uint32, error) {
	copy(vm.stack[:], args)
	if err := f.CallWithStack(ctx, vm.stack[:]); err != nil {
		return 0, fmt.Errorf("wasm policy: %w", err)
	}
	return uint32(vm.stack[0]), nil
}

// abortError is opa_abort's message (a conflict between rules, say).
type abortError string

func (e abortError) Error() string { return "policy aborted: " + string(e) }

// hostModule provides what the module's "env" imports forward to:
// opa_abort, opa_println and opa_builtin0..4.
func (vm *wasmVM) hostModule(ctx context.Context) error {
	b := vm.rt.NewHostModuleBuilder("host")
	b.NewFunctionBuilder().WithFunc(func(ctx context.Context, addr uint32) {
		panic(abortError(vm.cString(addr)))
	}).Export("opa_abort")
	// print() output is dropped, as topdown drops it without a print hook.
	b.NewFunctionBuilder().WithFunc(func(context.Context, uint32) {}).Export("opa_println")
	for arity := 0; arity <= 4; arity++ {
		params := make([]api.ValueType, arity+2) // builtin id, context, args
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		b.NewFunctionBuilder().WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
			args := make([]uint32, arity)
			for i := range args {
				args[i] = uint32(stack[2+i])
			}
			stack[0] = uint64(vm.builtin(ctx, uint32(stack[0]), args))
		}), params, []api.ValueType{api.ValueTypeI32}).Export("opa_builtin" + strconv.Itoa(arity))
	}
	_, err := b.Instantiate(ctx)
	return err
}

func (vm *wasmVM) cString(addr uint32) string {
	buf, ok := vm.mem.Read(addr, vm.mem.Size()-addr)
	if !ok {
		return "(unreadable)"
	}
	if n := bytes.IndexByte(buf, 0); n >= 0 {
		buf = buf[:n]
	}
	return string(buf)
}

// builtin runs a builtin the module calls out for, with topdown's
// implementation: the arguments come over as Rego text (sets stay sets),
// the result goes back as JSON where it has no set. A builtin error makes
// the call undefined, as it does in topdown (non-strict).
func (vm *wasmVM) builtin(ctx context.Context, id uint32, argAddrs []uint32) uint32 {
	bi, ok := vm.builtins[id]
	if !ok {
		panic(abortError(fmt.Sprintf("unknown builtin id %d", id)))
	}
	texts := make([][]byte, len(argAddrs))
	var key []byte
	for i, a := range argAddrs {
		text, err := vm.dump(ctx, vm.valueDump, a)
		if err != nil {
			panic(abortError(fmt.Sprintf("%s: argument %d: %v", bi.name, i+1, err)))
		}
		texts[i] = bytes.Clone(text) // the dump lives in the VM's memory
		if bi.pure {
			key = fmt.Appendf(key, "%d\x00%d\x00%s\x00", id, len(text), text)
		}
	}
	if m, ok := vm.memo[string(key)]; ok && bi.pure { // only pure results are kept
		return vm.builtinResult(ctx, bi.name, m)
	}
	args := make([]*ast.Term, len(argAddrs))
	for i, text := range texts {
		var err error
		if args[i], err = parseValueText(text); err != nil {
			panic(abortError(fmt.Sprintf("%s: argument %d: %v", bi.name, i+1, err)))
		}
	}
	bctx := topdown.BuiltinContext{
		Context: ctx,
		Metrics: metrics.NoOp(),
		Seed:    rand.Reader,
		Time:    ast.NumberTerm(json.Number(strconv.FormatInt(time.Now().UnixNano(), 10))),
		Cache:   builtins.Cache{},
	}
	var out *ast.Term
	if err := bi.fn(bctx, args, func(t *ast.Term) error { out = t; return nil }); err != nil || out == nil {
		return 0
	}
	m := memoResult{raw: []byte(out.String())}
	if !hasSet(out.Value) {
		if j, err := ast.JSON(out.Value); err == nil {
			if b, err := json.Marshal(j); err == nil {
				m = memoResult{raw: b, json: true}
			}
		}
	}
	if bi.pure {
		if vm.memo == nil || len(vm.memo) >= builtinMemoSize {
			vm.memo = make(map[string]memoResult, builtinMemoSize)
		}
		vm.memo[string(key)] = m
	}
	return vm.builtinResult(ctx, bi.name, m)
}

// builtinResult parses a builtin's result into the module.
func (vm *wasmVM) builtinResult(ctx context.Context, name string, m memoResult) uint32 {
	parser := vm.valueParse
	if m.json {
		parser = vm.jsonParse
	}
	addr, err := vm.parseWith(ctx, parser, m.raw)
	if err != nil {
		panic(abortError(fmt.Sprintf("%s: result: %v", name, err)))
	}
	return addr
}

// parseValueText reads a value the module dumped as Rego text. Without a
// set in it the text is JSON, read at a fraction of the Rego parser's cost
// (which also re-sorts OPA's builtin table unless given capabilities);
// sets go through the parser.
func parseValueText(text []byte) (*ast.Term, error) {
	if json.Valid(text) {
		v, err := ast.ValueFromReader(bytes.NewReader(text))
		if err != nil {
			return nil, err
		}
		return ast.NewTerm(v), nil
	}
	body, err := ast.ParseBodyWithOpts(string(text), ast.ParserOptions{Capabilities: parserCapabilities(), RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, err
	}
	if len(body) != 1 {
		return nil, fmt.Errorf("%d expressions, want one value", len(body))
	}
	t, ok := body[0].Terms.(*ast.Term)
	if !ok {
		return nil, fmt.Errorf("not a value: %v", body[0])
	}
	return t, nil
}

var parserCapabilities = sync.OnceValue(func() *ast.Capabilities { return ast.CapabilitiesForThisVersion() })

func hasSet(v ast.Value) bool {
	found := false
	ast.WalkTerms(v, func(t *ast.Term) bool {
		if _, ok := t.Value.(ast.Set); ok {
			found = true
		}
		return found
	})
	return found
}

// envModule is the module the policy imports "env" from: wazero host
// modules cannot export a memory, so this tiny Wasm module defines the
// memory and re-exports the "host" module's functions under env's names.
// Written out by hand (the binary format is small for this).
func envModule(minPages uint32) []byte {
	imports := []struct {
		name string
		typ  byte
	}{{"opa_abort", 0}, {"opa_println", 0}, {"opa_builtin0", 1}, {"opa_builtin1", 2}, {"opa_builtin2", 3}, {"opa_builtin3", 4}, {"opa_builtin4", 5}}
	const i32, funcType = 0x7f, 0x60
	var m []byte
	m = append(m, 0, 'a', 's', 'm', 1, 0, 0, 0)
	section := func(id byte, body []byte) {
		m = append(m, id)
		m = appendULEB(m, uint32(len(body)))
		m = append(m, body...)
	}
	name := func(b []byte, s string) []byte { return append(appendULEB(b, uint32(len(s))), s...) }
	// Types: 0 is (i32) -> (); 1..5 are (i32 × 2..6) -> i32.
	types := []byte{6, funcType, 1, i32, 0}
	for n := 2; n <= 6; n++ {
		types = append(types, funcType, byte(n))
		for range n {
			types = append(types, i32)
		}
		types = append(types, 1, i32)
	}
	section(1, types)
	imp := []byte{byte(len(imports))}
	for _, f := range imports {
		imp = name(name(imp, "host"), f.name)
		imp = append(imp, 0, f.typ) // function import of type f.typ
	}
	section(2, imp)
	mem := appendULEB([]byte{1, 0}, minPages) // one memory, no maximum (the runtime's limit applies)
	section(5, mem)
	exp := []byte{byte(len(imports) + 1)}
	exp = append(name(exp, "memory"), 2, 0)
	for i, f := range imports {
		exp = append(name(exp, f.name), 0, byte(i))
	}
	section(7, exp)
	return m
}

func appendULEB(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
