package main

// STAND-IN until shared/config lands: reads the struct tags the way
// config.Load will (defaults, env, flags; min checked).

import (
	"flag"
	"os"
	"reflect"
	"strconv"
	"time"
)

func loadConfig(c *Config, args []string) error {
	fs := flag.NewFlagSet("flashsale", flag.ContinueOnError)
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f, tag := v.Field(i), v.Type().Field(i).Tag
		def := tag.Get("default")
		if e := tag.Get("env"); e != "" {
			if s, ok := os.LookupEnv(e); ok {
				def = s
			}
		}
		switch p := f.Addr().Interface().(type) {
		case *string:
			fs.StringVar(p, tag.Get("flag"), def, tag.Get("help"))
		case *int:
			n, _ := strconv.Atoi(def)
			fs.IntVar(p, tag.Get("flag"), n, tag.Get("help"))
		case *int64:
			n, _ := strconv.ParseInt(def, 10, 64)
			fs.Int64Var(p, tag.Get("flag"), n, tag.Get("help"))
		case *time.Duration:
			d, _ := time.ParseDuration(def)
			fs.DurationVar(p, tag.Get("flag"), d, tag.Get("help"))
		}
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	return nil
}
