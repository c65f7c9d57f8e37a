package results

import "sort"

// FigureNames is a set of figure names gathered from several maps: the
// figures of both sides of a comparison, of every run of a repeated
// scenario, or a result's single figures and its distributions. It is the
// one place that builds such a union, so every reader lists a scenario's
// figures in the same (sorted) order.
type FigureNames map[string]struct{}

// AddFigureNames adds m's keys to names (nil: a new set) and returns it.
func AddFigureNames[V any](names FigureNames, m map[string]V) FigureNames {
	if names == nil {
		names = FigureNames{}
	}
	for k := range m {
		names[k] = struct{}{}
	}
	return names
}

// Sorted is the names in order.
func (n FigureNames) Sorted() []string {
	out := make([]string, 0, len(n))
	for k := range n {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
