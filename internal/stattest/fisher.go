package stattest

// FisherGreater is the one-sided p-value of Fisher's exact test that the
// second group has a larger share of "hits" than the first: with a of n1
// runs in the first group and b of n2 in the second, the chance under the
// hypergeometric law (the margins fixed) of the second group having b or
// more of the a+b hits.
func FisherGreater(a, n1, b, n2 int) float64 {
	if n1 <= 0 || n2 <= 0 || a < 0 || b < 0 || a > n1 || b > n2 {
		return 1
	}
	hits := a + b
	all := binomial(n1+n2, hits)
	p := 0.0
	for k := b; k <= min(hits, n2); k++ {
		p += binomial(n2, k) * binomial(n1, hits-k) / all
	}
	return min(1, p)
}

// FisherMinP is the smallest p FisherGreater can give with n1 and n2 runs:
// every one of the second group's runs a hit, none of the first's.
func FisherMinP(n1, n2 int) float64 {
	return FisherGreater(0, n1, n2, n2)
}
