// Command promql-selectors parses PromQL expressions with Prometheus's own parser and prints, for
// each, the metric selectors it names (metric name and label matchers) as one JSON line.
//
// Input: one JSON string per line on stdin. Output: one JSON object per line,
// {"selectors": [{"name": ..., "matchers": [{"label": ..., "type": "=", "value": ...}]}],
//  "grouping": [labels named in by/without/on/ignoring], "error": "..."}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

type matcher struct {
	Label string `json:"label"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

type selector struct {
	Name     string    `json:"name"`
	Matchers []matcher `json:"matchers"`
}

type result struct {
	Selectors []selector `json:"selectors"`
	Grouping  []string   `json:"grouping"`
	Error     string     `json:"error,omitempty"`
}

func analyse(expr string) result {
	out := result{Selectors: []selector{}, Grouping: []string{}}
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	grouping := map[string]bool{}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		switch v := n.(type) {
		case *parser.VectorSelector:
			sel := selector{Name: v.Name, Matchers: []matcher{}}
			for _, m := range v.LabelMatchers {
				if m.Name == labels.MetricName {
					if sel.Name == "" && m.Type == labels.MatchEqual {
						sel.Name = m.Value
					}
					continue
				}
				sel.Matchers = append(sel.Matchers, matcher{m.Name, m.Type.String(), m.Value})
			}
			out.Selectors = append(out.Selectors, sel)
		case *parser.AggregateExpr:
			for _, g := range v.Grouping {
				grouping[g] = true
			}
		case *parser.BinaryExpr:
			if v.VectorMatching != nil {
				for _, g := range v.VectorMatching.MatchingLabels {
					grouping[g] = true
				}
				for _, g := range v.VectorMatching.Include {
					grouping[g] = true
				}
			}
		}
		return nil
	})
	for g := range grouping {
		out.Grouping = append(out.Grouping, g)
	}
	sort.Strings(out.Grouping)
	return out
}

func main() {
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	encoder := json.NewEncoder(os.Stdout)
	for scanner.Scan() {
		var expr string
		if err := json.Unmarshal(scanner.Bytes(), &expr); err != nil {
			fmt.Fprintf(os.Stderr, "promql-selectors: input line is not a JSON string: %v\n", err)
			os.Exit(2)
		}
		if err := encoder.Encode(analyse(expr)); err != nil {
			fmt.Fprintf(os.Stderr, "promql-selectors: %v\n", err)
			os.Exit(1)
		}
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "promql-selectors: %v\n", err)
		os.Exit(1)
	}
}
