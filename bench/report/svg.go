package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// This file is a deliberately small line-chart renderer: a figure is a column
// of panels sharing a width, each panel has two axes (linear or log10), line
// series with optional point markers, and a legend on the right. It writes
// self-contained SVG (no scripts, no external fonts or styles) so a report can
// be attached to a CI run or opened from disk.

const (
	figureWidth   = 960
	figureMargin  = 20
	headerHeight  = 56 // figure title and subtitle
	panelHeight   = 330
	panelGap      = 18
	plotLeft      = 78 // room for y tick labels and the y axis label
	plotRight     = 225
	plotTop       = 36 // panel title
	plotBottom    = 56 // x tick labels and the x axis label
	legendWidth   = 205
	fontFamily    = "DejaVu Sans, Helvetica, Arial, sans-serif"
	axisColor     = "#333333"
	gridColor     = "#e3e3e3"
	minTickSpaceX = 46.0 // pixels between x tick labels before some are dropped
	minTickSpaceY = 22.0
)

type point struct{ x, y float64 }

type series struct {
	name    string // legend text and data-series attribute
	color   string
	dash    string // SVG stroke-dasharray; empty for solid
	markers bool
	points  []point
}

type tick struct {
	v     float64
	label string
}

type axis struct {
	label    string
	log      bool
	min, max float64
	ticks    []tick
}

type panel struct {
	title  string
	note   string // drawn in place of the plot when there is nothing to plot
	x, y   axis
	series []series
}

type figure struct {
	title    string
	subtitle string
	panels   []panel
}

func (a axis) pos(v float64, from, to float64) float64 {
	lo, hi := a.min, a.max
	if a.log {
		v = math.Log10(math.Max(v, a.min))
		lo, hi = math.Log10(lo), math.Log10(hi)
	}
	if hi == lo {
		return (from + to) / 2
	}
	v = math.Max(lo, math.Min(hi, v))
	return from + (v-lo)/(hi-lo)*(to-from)
}

func (f figure) height() int {
	n := max(len(f.panels), 1)
	return figureMargin*2 + headerHeight + n*panelHeight + (n-1)*panelGap
}

// render writes the figure as an SVG document.
func (f figure) render(w io.Writer) error {
	var b bytes.Buffer
	h := f.height()
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12" fill="%s">`+"\n",
		figureWidth, h, figureWidth, h, fontFamily, axisColor)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(f.title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>`+"\n", figureWidth, h)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="18" font-weight="bold">%s</text>`+"\n", figureMargin, figureMargin+18, esc(f.title))
	if f.subtitle != "" {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="#666666">%s</text>`+"\n", figureMargin, figureMargin+40, esc(f.subtitle))
	}
	if len(f.panels) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="14">no steps were measured</text>`+"\n", figureMargin, figureMargin+headerHeight+40)
	}
	for i, p := range f.panels {
		top := figureMargin + headerHeight + i*(panelHeight+panelGap)
		p.render(&b, figureMargin, top, figureWidth-2*figureMargin, panelHeight)
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

func (p panel) render(b *bytes.Buffer, left, top, width, height int) {
	fmt.Fprintf(b, `<g class="panel" transform="translate(%d,%d)">`+"\n", left, top)
	fmt.Fprintf(b, `<rect x="0" y="0" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", width, height, gridColor)
	fmt.Fprintf(b, `<text class="panel-title" x="10" y="22" font-size="14" font-weight="bold">%s</text>`+"\n", esc(p.title))

	x0, x1 := float64(plotLeft), float64(width-plotRight)
	y0, y1 := float64(height-plotBottom), float64(plotTop)
	if p.note != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13" fill="#666666">%s</text>`+"\n", (x0+x1)/2, (y0+y1)/2, esc(p.note))
		b.WriteString("</g>\n")
		return
	}

	// Grid and ticks first, so data draws over them.
	b.WriteString(`<g class="grid" stroke="` + gridColor + `" stroke-width="1">` + "\n")
	for _, t := range p.x.ticks {
		x := p.x.pos(t.v, x0, x1)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x, y0, x, y1)
	}
	for _, t := range p.y.ticks {
		y := p.y.pos(t.v, y0, y1)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", x0, y, x1, y)
	}
	b.WriteString("</g>\n")

	b.WriteString(`<g class="axis x-axis">` + "\n")
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x0, y0, x1, y0, axisColor)
	for _, t := range p.x.ticks {
		x := p.x.pos(t.v, x0, x1)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x, y0, x, y0+5, axisColor)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, y0+18, esc(t.label))
	}
	fmt.Fprintf(b, `<text class="axis-label" x="%.1f" y="%.1f" text-anchor="middle" font-size="13">%s</text>`+"\n", (x0+x1)/2, y0+42, esc(p.x.label))
	b.WriteString("</g>\n")

	b.WriteString(`<g class="axis y-axis">` + "\n")
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x0, y0, x0, y1, axisColor)
	for _, t := range p.y.ticks {
		y := p.y.pos(t.v, y0, y1)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x0-5, y, x0, y, axisColor)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-8, y+4, esc(t.label))
	}
	cy := (y0 + y1) / 2
	fmt.Fprintf(b, `<text class="axis-label" x="18" y="%.1f" text-anchor="middle" font-size="13" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", cy, cy, esc(p.y.label))
	b.WriteString("</g>\n")

	for _, s := range p.series {
		fmt.Fprintf(b, `<g class="series" data-series="%s" stroke="%s" fill="%s">`+"\n", esc(s.name), s.color, s.color)
		var pts []string
		for _, pt := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.x.pos(pt.x, x0, x1), p.y.pos(pt.y, y0, y1)))
		}
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke-width="2" stroke-linejoin="round"%s points="%s"/>`+"\n", dash, strings.Join(pts, " "))
		if s.markers {
			for _, pt := range s.points {
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3"/>`+"\n", p.x.pos(pt.x, x0, x1), p.y.pos(pt.y, y0, y1))
			}
		}
		b.WriteString("</g>\n")
	}

	lx := float64(width - legendWidth)
	fmt.Fprintf(b, `<g class="legend" transform="translate(%.1f,%d)">`+"\n", lx, plotTop)
	for i, s := range p.series {
		y := float64(i*20) + 8
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		fmt.Fprintf(b, `<line x1="0" y1="%.1f" x2="26" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", y, y, s.color, dash)
		if s.markers {
			fmt.Fprintf(b, `<circle cx="13" cy="%.1f" r="3" fill="%s"/>`+"\n", y, s.color)
		}
		fmt.Fprintf(b, `<text x="34" y="%.1f">%s</text>`+"\n", y+4, esc(s.name))
	}
	b.WriteString("</g>\n</g>\n")
}

// linearAxis spans [0, hi] (latencies and rates start at zero, and a chart
// that does not is easy to misread) with 1-2-5 ticks.
func linearAxis(label string, lo, hi float64, pixels float64, minSpace float64) axis {
	if hi <= lo {
		hi = lo + 1
	}
	maxTicks := max(2, int(pixels/minSpace))
	step := niceStep((hi - lo) / float64(min(maxTicks, 8)))
	a := axis{label: label, min: math.Floor(lo/step) * step, max: math.Ceil(hi/step) * step}
	for v := a.min; v <= a.max+step/2; v += step {
		a.ticks = append(a.ticks, tick{v: v, label: formatNumber(v)})
	}
	return a
}

// logAxis spans the decades around [lo, hi] with ticks at 1, 2 and 5 times
// each power of ten, thinned so labels never collide.
func logAxis(label string, lo, hi float64, pixels float64, minSpace float64) axis {
	if lo <= 0 {
		lo = hi / 1000
	}
	if hi <= lo {
		hi = lo * 10
	}
	a := axis{label: label, log: true, min: niceFloor(lo), max: niceCeil(hi)}
	var candidates []float64
	for e := math.Floor(math.Log10(a.min)); e <= math.Ceil(math.Log10(a.max)); e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= a.min*(1-1e-9) && v <= a.max*(1+1e-9) {
				candidates = append(candidates, roundSig(v))
			}
		}
	}
	a.ticks = thin(a, candidates, pixels, minSpace)
	return a
}

// valueTicks puts ticks at the given values (the measured rates, which are the
// most informative labels on a rate axis), dropping labels that would overlap.
func valueTicks(a axis, values []float64, pixels, minSpace float64) axis {
	a.ticks = thin(a, values, pixels, minSpace)
	return a
}

func thin(a axis, values []float64, pixels, minSpace float64) []tick {
	var out []tick
	last := math.Inf(-1)
	for _, v := range values {
		p := a.pos(v, 0, pixels)
		if p-last < minSpace {
			continue
		}
		out = append(out, tick{v: v, label: formatNumber(v)})
		last = p
	}
	return out
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// niceFloor and niceCeil round to the 1-2-5 sequence below/above v.
func niceFloor(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{5, 2, 1} {
		if m*p <= v*(1+1e-9) {
			return roundSig(m * p)
		}
	}
	return p
}

func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return roundSig(m * p)
		}
	}
	return 10 * p
}

func roundSig(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

// formatNumber prints axis values without exponent or float noise
// (0.30000000000000004 → 0.3).
func formatNumber(v float64) string {
	return strconv.FormatFloat(roundSig(v), 'f', -1, 64)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writes to a strings.Builder cannot fail
	return b.String()
}
