// Command ddp trains a small multilayer perceptron by data-parallel
// full-batch gradient descent: every rank holds a shard of a generated
// dataset, computes the gradient of its shard, and the gradients are summed
// through a fusion.Bucketer (package hcomm/fusion) on a communication
// stream while the backward pass of the earlier layers is still computing.
//
// Run it as several ranks of one process, or as a job of processes:
//
//	go run ./examples/ddp -local 2
//	hcomm run -n 2 -- ./ddp
//
// It trains twice, with overlap (each layer's gradients are handed to the
// Bucketer as soon as the backward pass has produced them) and without
// (all at the end of the backward pass), prints the average step time of
// each, and checks that both reach the loss a single process reaches on
// the full batch. It exits with status 1 if they do not.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/fusion"
)

// config is the command line.
type config struct {
	local     int     // ranks in this process; 0: one rank of a launched job
	steps     int     // training steps
	samples   int     // dataset size (the full batch)
	inputs    int     // features
	hidden    int     // width of the hidden layers
	layers    int     // hidden layers
	classes   int     // output classes
	lr        float64 // learning rate
	threshold int     // Bucketer threshold, bytes
	seed      uint64
	tol       float64 // relative tolerance of the loss check
}

func main() {
	var cfg config
	flag.IntVar(&cfg.local, "local", 0, "run `N` ranks in this process (0: one rank of a job started by hcomm run)")
	flag.IntVar(&cfg.steps, "steps", 30, "training steps")
	flag.IntVar(&cfg.samples, "samples", 1024, "dataset size (one full batch)")
	flag.IntVar(&cfg.inputs, "inputs", 32, "input features")
	flag.IntVar(&cfg.hidden, "hidden", 128, "hidden layer width")
	flag.IntVar(&cfg.layers, "layers", 3, "hidden layers")
	flag.IntVar(&cfg.classes, "classes", 8, "output classes")
	flag.Float64Var(&cfg.lr, "lr", 0.5, "learning rate")
	flag.IntVar(&cfg.threshold, "threshold", 64<<10, "gradient bucket size in `bytes`")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the dataset and the initial weights")
	flag.Float64Var(&cfg.tol, "tol", 1e-9, "relative tolerance of the final loss against a single process")
	flag.Parse()
	if err := cfg.check(); err != nil {
		fmt.Fprintln(os.Stderr, "ddp:", err)
		os.Exit(2)
	}
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ddp:", err)
		os.Exit(1)
	}
}

func (cfg config) check() error {
	switch {
	case cfg.local < 0:
		return errors.New("-local must not be negative")
	case cfg.steps < 1, cfg.samples < 1, cfg.inputs < 1, cfg.hidden < 1, cfg.layers < 0, cfg.classes < 2:
		return errors.New("-steps, -samples, -inputs, -hidden must be positive, -layers non-negative, -classes at least 2")
	case cfg.threshold < 1:
		return errors.New("-threshold must be positive")
	}
	return nil
}

// run trains on every rank (in this process or as this process's rank),
// prints the report on rank 0 and checks the result.
func run(ctx context.Context, cfg config, out io.Writer) error {
	var comms []*hcomm.Comm
	if cfg.local > 0 {
		cs, err := hcomm.NewLocal(ctx, cfg.local, nil)
		if err != nil {
			return err
		}
		comms = cs
	} else {
		c, err := hcomm.Init(ctx, nil)
		if err != nil {
			return err
		}
		comms = []*hcomm.Comm{c}
	}
	results := make([]result, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			results[i], errs[i] = rank(ctx, cfg, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	res := results[0]
	if res.rank != 0 {
		return nil // rank 0 of a launched job reports
	}
	ref := train(ctx, cfg, nil, false)
	if ref.err != nil {
		return ref.err
	}
	fmt.Fprintf(out, "ddp: %d ranks, %d samples, MLP %d→%d×%d→%d (%d parameters, %d buckets)\n",
		res.size, cfg.samples, cfg.inputs, cfg.hidden, cfg.layers, cfg.classes, res.params, res.buckets)
	fmt.Fprintf(out, "loss: step 1 %.6f, step %d %.12f (single process %.12f)\n", res.first, cfg.steps, res.on.loss, ref.loss)
	fmt.Fprintf(out, "step time: overlap on %v, off %v (single process %v)\n",
		res.on.step.Round(time.Microsecond), res.off.step.Round(time.Microsecond), ref.step.Round(time.Microsecond))
	for _, t := range []struct {
		name string
		got  float64
	}{{"overlap on", res.on.loss}, {"overlap off", res.off.loss}} {
		if d := math.Abs(t.got-ref.loss) / math.Abs(ref.loss); !(d <= cfg.tol) {
			return fmt.Errorf("final loss with %s %.15g differs from the single process's %.15g (relative %.3g > %g)",
				t.name, t.got, ref.loss, d, cfg.tol)
		}
	}
	if !(res.on.loss < res.first) {
		return fmt.Errorf("loss did not decrease: %g → %g", res.first, res.on.loss)
	}
	fmt.Fprintln(out, "final loss matches the single-process run")
	return nil
}

// result is one rank's outcome.
type result struct {
	rank, size      int
	params, buckets int
	first           float64 // loss at step 1
	on, off         outcome
}

// outcome is one training run.
type outcome struct {
	loss    float64       // after the last step
	first   float64       // at step 1
	step    time.Duration // average step time, the first step excluded
	buckets int
	err     error
}

func rank(ctx context.Context, cfg config, c *hcomm.Comm) (result, error) {
	res := result{rank: c.Rank(), size: c.Size()}
	res.on = train(ctx, cfg, c, true)
	if res.on.err != nil {
		return res, res.on.err
	}
	res.off = train(ctx, cfg, c, false)
	if res.off.err != nil {
		return res, res.off.err
	}
	res.first, res.buckets = res.on.first, res.on.buckets
	res.params = newModel(cfg).params()
	return res, nil
}

// train runs cfg.steps steps of gradient descent. With c nil it is a
// single process on the full batch; otherwise this rank trains on its shard
// and the gradients go through a Bucketer, handed over layer by layer
// during the backward pass (overlap) or all after it.
func train(ctx context.Context, cfg config, c *hcomm.Comm, overlap bool) outcome {
	data := makeDataset(cfg)
	lo, hi := 0, cfg.samples
	if c != nil {
		lo, hi = c.Rank()*cfg.samples/c.Size(), (c.Rank()+1)*cfg.samples/c.Size()
	}
	m := newModel(cfg)
	shard := data.slice(lo, hi)
	// Gradients: plain slices for a single process, views into the
	// Bucketer's fusion buffers otherwise (reduced in place, no copies).
	grads := m.zeroGrads()
	var b *fusion.Bucketer
	var handles []*fusion.Grad // per layer: weights, biases
	if c != nil {
		b = fusion.NewBucketer(c, fusion.Config{Threshold: cfg.threshold, Op: hcomm.Sum})
		defer b.Close()
		for l := range m.layers {
			gw, err := fusion.RegisterView[float64](b, fmt.Sprintf("layer%d.w", l), len(grads[l].w))
			if err != nil {
				return outcome{err: err}
			}
			gb, err := fusion.RegisterView[float64](b, fmt.Sprintf("layer%d.b", l), len(grads[l].b))
			if err != nil {
				return outcome{err: err}
			}
			handles = append(handles, gw, gb)
		}
		if err := b.Build(ctx); err != nil {
			return outcome{err: err}
		}
		for l := range m.layers {
			var err1, err2 error
			grads[l].w, err1 = fusion.View[float64](handles[2*l])
			grads[l].b, err2 = fusion.View[float64](handles[2*l+1])
			if err := errors.Join(err1, err2); err != nil {
				return outcome{err: err}
			}
		}
	}
	ready := func(l int) error {
		if b == nil {
			return nil
		}
		return errors.Join(handles[2*l].Ready(), handles[2*l+1].Ready())
	}
	var o outcome
	if b != nil {
		o.buckets = len(b.Buckets())
	}
	lossBuf := []float64{0}
	var total time.Duration
	for step := range cfg.steps {
		start := time.Now()
		acts := m.forward(shard.x)
		lossSum, err := m.backward(shard, acts, grads, float64(cfg.samples), func(l int) error {
			if overlap {
				return ready(l) // this layer's gradients are final: reduce them now
			}
			return nil
		})
		if err != nil {
			return outcome{err: err}
		}
		if b != nil {
			if !overlap {
				for l := len(m.layers) - 1; l >= 0; l-- {
					if err := ready(l); err != nil {
						return outcome{err: err}
					}
				}
			}
			if err := b.Wait(ctx); err != nil {
				return outcome{err: err}
			}
		}
		m.update(grads, cfg.lr)
		if step > 0 || cfg.steps == 1 {
			total += time.Since(start)
		}
		// The loss before this step's update, summed over the shards.
		lossBuf[0] = lossSum
		if c != nil {
			if err := hcomm.AllReduce(ctx, c, lossBuf, lossBuf, hcomm.Sum); err != nil {
				return outcome{err: err}
			}
		}
		if step == 0 {
			o.first = lossBuf[0] / float64(cfg.samples)
		}
	}
	// The loss after the last update.
	lossBuf[0] = m.loss(shard, m.forward(shard.x))
	if c != nil {
		if err := hcomm.AllReduce(ctx, c, lossBuf, lossBuf, hcomm.Sum); err != nil {
			return outcome{err: err}
		}
	}
	o.loss = lossBuf[0] / float64(cfg.samples)
	o.step = total / time.Duration(max(cfg.steps-1, 1))
	return o
}

// dataset is a generated classification problem: Gaussian inputs labelled
// by a random "teacher" network.
type dataset struct {
	n, d int
	x    []float64 // n×d
	y    []int
}

func makeDataset(cfg config) dataset {
	rng := rand.New(rand.NewPCG(cfg.seed, 0xda7a))
	ds := dataset{n: cfg.samples, d: cfg.inputs, x: make([]float64, cfg.samples*cfg.inputs), y: make([]int, cfg.samples)}
	teacher := make([]float64, cfg.inputs*cfg.classes)
	for i := range teacher {
		teacher[i] = rng.NormFloat64()
	}
	for i := range ds.x {
		ds.x[i] = rng.NormFloat64()
	}
	for s := range ds.n {
		best, arg := math.Inf(-1), 0
		for k := range cfg.classes {
			v := 0.0
			for j := range ds.d {
				v += ds.x[s*ds.d+j] * teacher[j*cfg.classes+k]
			}
			if v = math.Tanh(v); v > best {
				best, arg = v, k
			}
		}
		ds.y[s] = arg
	}
	return ds
}

func (ds dataset) slice(lo, hi int) dataset {
	return dataset{n: hi - lo, d: ds.d, x: ds.x[lo*ds.d : hi*ds.d], y: ds.y[lo:hi]}
}

// layer is a dense layer: out = in·w + b, w in×out (row-major).
type layer struct {
	in, out int
	w, b    []float64
}

// grad holds a layer's gradients.
type grad struct{ w, b []float64 }

type model struct {
	layers []layer
}

// newModel initializes the weights from cfg.seed, identically everywhere.
func newModel(cfg config) *model {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x3e1))
	widths := []int{cfg.inputs}
	for range cfg.layers {
		widths = append(widths, cfg.hidden)
	}
	widths = append(widths, cfg.classes)
	m := &model{}
	for i := 0; i+1 < len(widths); i++ {
		l := layer{in: widths[i], out: widths[i+1], w: make([]float64, widths[i]*widths[i+1]), b: make([]float64, widths[i+1])}
		scale := 1 / math.Sqrt(float64(l.in))
		for j := range l.w {
			l.w[j] = rng.NormFloat64() * scale
		}
		m.layers = append(m.layers, l)
	}
	return m
}

func (m *model) params() int {
	n := 0
	for _, l := range m.layers {
		n += len(l.w) + len(l.b)
	}
	return n
}

func (m *model) zeroGrads() []grad {
	g := make([]grad, len(m.layers))
	for i, l := range m.layers {
		g[i] = grad{w: make([]float64, len(l.w)), b: make([]float64, len(l.b))}
	}
	return g
}

// forward returns every layer's output for the rows of x: tanh for the
// hidden layers, the logits for the last one. acts[0] is x.
func (m *model) forward(x []float64) [][]float64 {
	acts := [][]float64{x}
	in := x
	for i, l := range m.layers {
		rows := len(in) / l.in
		out := make([]float64, rows*l.out)
		for r := range rows {
			o := out[r*l.out : (r+1)*l.out]
			copy(o, l.b)
			for k, v := range in[r*l.in : (r+1)*l.in] {
				if v == 0 {
					continue
				}
				for j, w := range l.w[k*l.out : (k+1)*l.out] {
					o[j] += v * w
				}
			}
			if i < len(m.layers)-1 {
				for j := range o {
					o[j] = math.Tanh(o[j])
				}
			}
		}
		acts = append(acts, out)
		in = out
	}
	return acts
}

// softmax turns a row of logits into probabilities in place and returns
// the log-probability of class y.
func softmax(row []float64, y int) float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = max(mx, v)
	}
	sum := 0.0
	for j, v := range row {
		row[j] = math.Exp(v - mx)
		sum += row[j]
	}
	logp := math.Log(row[y] / sum) // before normalizing row[y]
	for j := range row {
		row[j] /= sum
	}
	return logp
}

// loss returns the summed cross-entropy of the shard.
func (m *model) loss(ds dataset, acts [][]float64) float64 {
	logits := acts[len(acts)-1]
	c := m.layers[len(m.layers)-1].out
	row := make([]float64, c)
	total := 0.0
	for s := range ds.n {
		copy(row, logits[s*c:(s+1)*c])
		total -= softmax(row, ds.y[s])
	}
	return total
}

// backward computes the gradients of the mean cross-entropy over n samples
// (the whole batch, of which ds is a shard) into grads, last layer first,
// calling done(l) as soon as layer l's gradients are final. It returns the
// shard's summed loss, or done's first error.
func (m *model) backward(ds dataset, acts [][]float64, grads []grad, n float64, done func(l int) error) (float64, error) {
	last := len(m.layers) - 1
	c := m.layers[last].out
	delta := make([]float64, ds.n*c) // dLoss/dlogits
	copy(delta, acts[last+1])
	total := 0.0
	for s := range ds.n {
		row := delta[s*c : (s+1)*c]
		total -= softmax(row, ds.y[s])
		row[ds.y[s]]--
		for j := range row {
			row[j] /= n
		}
	}
	for li := last; li >= 0; li-- {
		l := m.layers[li]
		in := acts[li]
		g := grads[li]
		clear(g.w)
		clear(g.b)
		for s := range ds.n {
			d := delta[s*l.out : (s+1)*l.out]
			for j, v := range d {
				g.b[j] += v
			}
			for k, a := range in[s*l.in : (s+1)*l.in] {
				if a == 0 {
					continue
				}
				gw := g.w[k*l.out : (k+1)*l.out]
				for j, v := range d {
					gw[j] += a * v
				}
			}
		}
		if li > 0 {
			// Propagate through the weights and the previous tanh.
			prev := make([]float64, ds.n*l.in)
			for s := range ds.n {
				d := delta[s*l.out : (s+1)*l.out]
				p := prev[s*l.in : (s+1)*l.in]
				for k := range p {
					sum := 0.0
					for j, w := range l.w[k*l.out : (k+1)*l.out] {
						sum += w * d[j]
					}
					a := in[s*l.in+k]
					p[k] = sum * (1 - a*a)
				}
			}
			delta = prev
		}
		if err := done(li); err != nil {
			return 0, err
		}
	}
	return total, nil
}

// update takes a gradient descent step.
func (m *model) update(grads []grad, lr float64) {
	for i, l := range m.layers {
		for j := range l.w {
			l.w[j] -= lr * grads[i].w[j]
		}
		for j := range l.b {
			l.b[j] -= lr * grads[i].b[j]
		}
	}
}
