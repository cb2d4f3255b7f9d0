package settings

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every variable a Config field overrides has that field in Config, so
// FromConfig carries it from the root's Config.
func TestConfigFields(t *testing.T) {
	ct := reflect.TypeFor[Config]()
	for _, d := range Table {
		if d.Field == "" {
			continue
		}
		if _, ok := ct.FieldByName(d.Field); !ok {
			t.Errorf("%s names Config field %s, which settings.Config lacks", d.Name, d.Field)
		}
	}
}

func TestFromConfig(t *testing.T) {
	type root struct { // the root's Config has these fields and more
		Config
		Other int
	}
	if got := FromConfig((*root)(nil)); got != (Config{}) {
		t.Errorf("FromConfig(nil) = %+v", got)
	}
	want := Config{Rank: 1, Size: 2, Timeout: time.Second, Algo: "ring", NSocks: 3, Checksum: true, Logger: slog.Default()}
	if got := FromConfig(&root{Config: want, Other: 7}); got != want {
		t.Errorf("FromConfig = %+v, want %+v", got, want)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "no field") {
			t.Errorf("a Config without the fields: recovered %v, want a panic naming the field", r)
		}
	}()
	FromConfig(struct{ Rank int }{})
}

func TestOverlay(t *testing.T) {
	tests := []struct {
		c       Config
		check   func(v Values) bool
		source  string // the variable recorded as set by the program
		wantErr string
	}{
		{c: Config{Timeout: time.Minute}, check: func(v Values) bool { return v.Timeout == time.Minute }, source: "HCOMM_TIMEOUT"},
		{c: Config{Timeout: -1}, check: func(v Values) bool { return v.Timeout == 0 }, source: "HCOMM_TIMEOUT"},
		{c: Config{ConnectTimeout: time.Second}, check: func(v Values) bool { return v.ConnectTimeout == time.Second }, source: "HCOMM_CONNECT_TIMEOUT"},
		{c: Config{Transport: "TCP"}, check: func(v Values) bool { return v.Transport == "tcp" }, source: "HCOMM_TRANSPORT"},
		{c: Config{Transport: "ib"}, wantErr: "Config.Transport"},
		{c: Config{NSocks: 17}, wantErr: "Config.NSocks = 17"},
		{c: Config{NSocks: 4}, check: func(v Values) bool { return v.NSocks == 4 }, source: "HCOMM_NSOCKS"},
		{c: Config{ShmCMA: -5}, check: func(v Values) bool { return v.ShmCMA == 0 }, source: "HCOMM_SHM_CMA"},
		{c: Config{ZeroCopy: -5}, check: func(v Values) bool { return v.ZeroCopy == 0 }, source: "HCOMM_ZERO_COPY"},
		{c: Config{ZeroCopy: 1 << 20}, check: func(v Values) bool { return v.ZeroCopy == 1<<20 && v.ZeroCopyFixed }, source: "HCOMM_ZERO_COPY"},
		{c: Config{CopyEngine: -5}, check: func(v Values) bool { return v.CopyEngine == -1 }, source: "HCOMM_COPY_ENGINE"},
		{c: Config{Yield: "0"}, check: func(v Values) bool { return v.Yield == -1 }, source: "HCOMM_YIELD"},
		{c: Config{Yield: "maybe"}, wantErr: "Config.Yield"},
		{c: Config{DumpSignal: "sigusr2"}, check: func(v Values) bool { return v.DumpSignal == "USR2" }, source: "HCOMM_DUMP_SIGNAL"},
		{c: Config{DumpSignal: "HUP"}, wantErr: "Config.DumpSignal"},
		{c: Config{CheckResults: true}, check: func(v Values) bool { return v.CheckResults }, source: "HCOMM_CHECK_RESULTS"},
		{c: Config{Logger: slog.Default()}, check: func(v Values) bool { return v.LoggerFor(Config{Logger: slog.Default()}) == slog.Default() }, source: "HCOMM_DEBUG"},
		{c: Config{Algo: "ring"}, check: func(v Values) bool { return v.Algo == "ring" }, source: "HCOMM_ALGO"},
	}
	for _, tt := range tests {
		v := Defaults()
		err := v.Overlay(tt.c)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Overlay(%+v) = %v, want an error naming %s", tt.c, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !tt.check(v) || v.Source[tt.source] != "config" || len(v.Source) != 1 {
			t.Errorf("Overlay(%+v): err %v, values %+v", tt.c, err, v)
		}
	}
	v := Defaults()
	if err := v.Overlay(Config{}); err != nil || len(v.Source) != 0 || !reflect.DeepEqual(v, Defaults()) {
		t.Errorf("Overlay of a zero Config changed the values: %+v, %v", v, err)
	}
}
