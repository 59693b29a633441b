package loadgen

import (
	"context"
	"fmt"
	"math"
	"time"
)

// FindMaxConfig tunes the search of FindMax.
type FindMaxConfig struct {
	// Start is the first rate tried (req/s).
	Start float64
	// Step is the measured duration of every step (the base Config's Warmup runs before each).
	Step time.Duration
	// Precision ends the bisection when (fail - pass) / pass <= Precision.
	Precision float64
	// MaxSteps bounds the number of runs.
	MaxSteps int
	// MaxRate bounds the ramp.
	MaxRate float64
	// MaxErrorRate is the share of errors (0–1) a passing step may have.
	MaxErrorRate float64
	// Retries reruns a step that failed in its tail only (its median still meets the tightest
	// objective) up to this many times; the rate passes if any run passes. Noise (another
	// process taking the CPU, a GC) only ever makes a step slower and shows in the tail first,
	// so a pass is trustworthy and a lone tail failure may not be. An overloaded step fails in
	// its median too and is not rerun.
	Retries int
	// OnStep, when set, receives every step as it ends.
	OnStep func(Step)
}

// DefaultFindMaxConfig starts at 1000 req/s with 5-second steps and stops at 5% precision.
func DefaultFindMaxConfig() FindMaxConfig {
	return FindMaxConfig{Start: 1000, Step: 5 * time.Second, Precision: 0.05, MaxSteps: 20, MaxRate: 10_000_000, MaxErrorRate: 0.001}
}

// Step is one run of the search.
type Step struct {
	N      int
	Phase  string // "ramp", "bisect" or "retry"
	Rate   float64
	Pass   bool
	Why    string // why it failed
	Result *Result
}

func (s Step) String() string {
	verdict := "PASS"
	if !s.Pass {
		verdict = "FAIL (" + s.Why + ")"
	}
	r := s.Result
	return fmt.Sprintf("step %2d %-6s %9.0f req/s: achieved %9.1f, p50 %s p99 %s p99.9 %s max %s, errors %d: %s",
		s.N, s.Phase, s.Rate, r.Achieved,
		fmtDur(time.Duration(r.Corrected.ValueAtPercentile(50))), fmtDur(time.Duration(r.Corrected.ValueAtPercentile(99))),
		fmtDur(time.Duration(r.Corrected.ValueAtPercentile(99.9))), fmtDur(time.Duration(r.Corrected.Max())),
		r.ErrorCount(), verdict)
}

// FindMax searches the highest constant rate at which base's load holds slo: it doubles the rate
// from fc.Start until a step fails, then bisects between the last pass and the first failure. A
// step passes when its result is valid, holds every objective, keeps errors under
// fc.MaxErrorRate and achieves at least 95% of its rate. It returns the highest passing rate and
// every step; ErrNoRateHolds when no rate passed. A step failing in its tail only is rerun up to
// fc.Retries times.
func FindMax(ctx context.Context, base Config, t Target, slo SLO, fc FindMaxConfig) (float64, []Step, error) {
	if fc.Start <= 0 || fc.Step <= 0 || fc.Precision <= 0 || fc.MaxSteps < 1 || fc.MaxRate < fc.Start || fc.Retries < 0 {
		return 0, nil, fmt.Errorf("%w: find-max: want start > 0, step > 0, precision > 0, max steps >= 1, max rate >= start, retries >= 0", ErrInvalidConfig)
	}
	if len(slo) == 0 {
		return 0, nil, fmt.Errorf("%w: find-max: empty slo", ErrInvalidConfig)
	}
	base.Duration = fc.Step
	base.Requests = 0
	if err := base.Validate(); err != nil {
		return 0, nil, err
	}
	var steps []Step
	lo, hi := 0.0, math.Inf(1)
	run := func(phase string, rate float64) (bool, error) {
		cfg := base
		cfg.Rate = rate
		for try := 0; ; try++ {
			r, err := Run(ctx, cfg, t)
			if err != nil {
				return false, err
			}
			s := Step{N: len(steps) + 1, Phase: phase, Rate: rate, Result: r}
			if try > 0 {
				s.Phase = "retry"
			}
			s.Pass, s.Why = judge(r, slo, fc.MaxErrorRate)
			steps = append(steps, s)
			if fc.OnStep != nil {
				fc.OnStep(s)
			}
			if s.Pass {
				lo = rate
				return true, ctx.Err()
			}
			if try >= fc.Retries || !tailOnly(r, slo) || ctx.Err() != nil || len(steps) >= fc.MaxSteps {
				hi = rate
				return false, ctx.Err()
			}
		}
	}
	for rate := fc.Start; math.IsInf(hi, 1) && rate <= fc.MaxRate && len(steps) < fc.MaxSteps; rate *= 2 {
		if _, err := run("ramp", rate); err != nil {
			return lo, steps, err
		}
	}
	for !math.IsInf(hi, 1) && len(steps) < fc.MaxSteps && (lo == 0 || (hi-lo)/lo > fc.Precision) {
		if _, err := run("bisect", math.Round((lo+hi)/2)); err != nil {
			return lo, steps, err
		}
		if hi < 1 {
			break
		}
	}
	if lo == 0 {
		return 0, steps, ErrNoRateHolds
	}
	return lo, steps, nil
}

func judge(r *Result, slo SLO, maxErr float64) (bool, string) {
	if r.Invalid && r.FinalLag > r.Config.MaxLag {
		return false, "generator behind schedule by " + r.FinalLag.Round(time.Millisecond).String()
	}
	if r.Invalid {
		return false, r.InvalidReason
	}
	if ok, why := r.Holds(slo); !ok {
		return false, why
	}
	if r.Requests > 0 && float64(r.ErrorCount()) > maxErr*float64(r.Requests) {
		return false, fmt.Sprintf("%d errors in %d requests", r.ErrorCount(), r.Requests)
	}
	if r.Config.Rate > 0 && r.Achieved < 0.95*r.Config.Rate {
		return false, fmt.Sprintf("achieved %.0f req/s", r.Achieved)
	}
	return true, ""
}

// tailOnly tells whether r's median meets the tightest objective of slo.
func tailOnly(r *Result, slo SLO) bool {
	tightest := slo[0].Max
	for _, o := range slo[1:] {
		tightest = min(tightest, o.Max)
	}
	return !r.Invalid && time.Duration(r.Corrected.ValueAtPercentile(50)) <= tightest
}
