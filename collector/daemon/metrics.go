package daemon

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtakit/dtakit/internal/promname"
)

// The daemon exports every counter of the collector's backend as
// dtakit_collector_<counter>_total, and its instances' sizes.

// Describe implements prometheus.Collector.
func (d *Daemon) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(d, ch) }

// Collect implements prometheus.Collector.
func (d *Daemon) Collect(ch chan<- prometheus.Metric) {
	var counters any = d.c.Counters()
	if d.cfg.Backend == "verbs" {
		counters = d.c.VerbsCounters()
	}
	promname.Counters(ch, "dtakit_collector", "collector counter ("+d.cfg.Backend+" backend)", counters)
	if e := d.exp; e != nil {
		st := e.status()
		e.mu.Lock()
		failed := e.failed
		e.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_export_epochs_total", "epochs exported", nil, nil), prometheus.CounterValue, float64(st.Epochs))
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_export_failures_total", "epoch exports that failed", nil, nil), prometheus.CounterValue, float64(failed))
		running, frac := 0.0, 0.0
		if st.Running {
			running = 1
			if st.Total > 0 {
				frac = float64(st.Done) / float64(st.Total)
			}
		}
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_export_running", "1 while an export runs", nil, nil), prometheus.GaugeValue, running)
		ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_export_instance_progress_ratio", "the running export's progress through its current instance", nil, nil), prometheus.GaugeValue, frac)
		if st.Last != nil {
			ch <- prometheus.MustNewConstMetric(prometheus.NewDesc("dtakit_export_last_seconds", "duration of the last export", nil, nil), prometheus.GaugeValue, st.Last.Seconds)
		}
	}
	desc := prometheus.NewDesc("dtakit_collector_region_bytes", "size of an instance's region", []string{"instance", "primitive"}, nil)
	for _, in := range d.insts {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(in.info.Length), strconv.Itoa(in.index), in.kind())
	}
}
