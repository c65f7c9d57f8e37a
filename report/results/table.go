package results

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Table is a text table for a spec's report, read by a person: a header
// and rows in aligned columns. A cell is printed as fmt's %v prints it,
// except a float64, which gets one decimal (Cellf for another format).
type Table struct {
	head  []string
	rows  [][]string
	right bool
}

// NewTable is a table with these column titles, left-aligned.
func NewTable(cols ...string) *Table { return &Table{head: cols} }

// AlignRight right-aligns every column (for tables of numbers).
func (t *Table) AlignRight() *Table {
	t.right = true
	return t
}

// Add appends a row; fewer cells than columns leave the rest empty.
func (t *Table) Add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		switch v := c.(type) {
		case float64:
			row[i] = fmt.Sprintf("%.1f", v)
		case string:
			row[i] = v
		default:
			row[i] = fmt.Sprint(v)
		}
	}
	t.rows = append(t.rows, row)
}

// Cellf formats one cell.
func Cellf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

// Len is the number of rows.
func (t *Table) Len() int { return len(t.rows) }

// String renders the table, a line per row after the header.
func (t *Table) String() string {
	var b strings.Builder
	flags := uint(0)
	if t.right {
		flags = tabwriter.AlignRight
	}
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', flags)
	line := func(cells []string) {
		for _, c := range cells {
			fmt.Fprint(w, c, "\t")
		}
		fmt.Fprintln(w)
	}
	line(t.head)
	for _, r := range t.rows {
		line(r)
	}
	w.Flush()
	return b.String()
}
