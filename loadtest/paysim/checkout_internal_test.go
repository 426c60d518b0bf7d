package paysim

import (
	"math"
	"strings"
	"testing"
)

func TestRupees(t *testing.T) {
	tests := []struct {
		paise int64
		want  string
	}{
		{0, "₹0.00"},
		{1, "₹0.01"},
		{99, "₹0.99"},
		{100, "₹1.00"},
		{99999, "₹999.99"},
		{100000, "₹1,000.00"},
		{1500000, "₹15,000.00"},
		{9999999, "₹99,999.99"},
		{15000000, "₹1,50,000.00"},
		{1234567890, "₹1,23,45,678.90"},
		{-250050, "-₹2,500.50"},
		{math.MaxInt64, "₹92,23,37,20,36,85,47,758.07"},
		{math.MinInt64, "-₹92,23,37,20,36,85,47,758.08"},
	}
	for _, tc := range tests {
		if got := rupees(tc.paise); got != tc.want {
			t.Errorf("rupees(%d) = %q; want %q", tc.paise, got, tc.want)
		}
	}
}

func TestReturnURL(t *testing.T) {
	tests := []struct {
		raw  string
		want bool // followed
	}{
		{"https://shop.example/orders/17?paid=1", true},
		{"http://127.0.0.1:8080/back", true},
		{"HTTPS://shop.example/", true},
		{"", false},
		{"javascript:alert(1)", false},
		{"JavaScript:alert(1)", false},
		{"javascript://shop.example/%0aalert(1)", false},
		{"data:text/html,<script>alert(1)</script>", false},
		{"ftp://shop.example/x", false},
		{"//evil.example/x", false},
		{"/orders/17", false},
		{"orders/17", false},
		{"https:///no-host", false},
		{"https:no-slashes", false},
		{" https://shop.example/", false},
		{"https://shop.example/\r\nSet-Cookie: x=1", false},
		{"https://shop.example/" + strings.Repeat("x", maxReturnLen), false},
	}
	for _, tc := range tests {
		want := ""
		if tc.want {
			want = tc.raw
		}
		if got := returnURL(tc.raw); got != want {
			t.Errorf("returnURL(%q) = %q; want %q", tc.raw, got, want)
		}
	}
}
