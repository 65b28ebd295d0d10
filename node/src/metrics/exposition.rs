//! Prometheus' text exposition format (version 0.0.4): a family's `# HELP` and `# TYPE`
//! lines, then its samples, each family once and whole.

use std::fmt::Write;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Summary,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
        }
    }
}

/// One sample: a suffix of the family's name (`""`, `"_sum"`, `"_count"`), labels and value.
pub struct Sample {
    pub suffix: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

impl Sample {
    pub fn new(labels: Vec<(&'static str, String)>, value: f64) -> Sample {
        Sample {
            suffix: "",
            labels,
            value,
        }
    }
}

/// The text of a scrape, built family by family.
#[derive(Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Writes a family; one without samples is left out.
    pub fn family(
        &mut self,
        name: &str,
        kind: Kind,
        help: &str,
        samples: impl IntoIterator<Item = Sample>,
    ) {
        let mut samples = samples.into_iter().peekable();
        if samples.peek().is_none() {
            return;
        }
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.name());
        for s in samples {
            self.out.push_str(name);
            self.out.push_str(s.suffix);
            if !s.labels.is_empty() {
                self.out.push('{');
                for (i, (k, v)) in s.labels.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
                }
                self.out.push('}');
            }
            self.out.push(' ');
            self.out.push_str(&format_value(s.value));
            self.out.push('\n');
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

/// A sample value: integers without a fraction, `NaN`, `+Inf`, `-Inf` as Prometheus spells
/// them.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// A label value: backslash, double quote and line feed escaped.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Help text: backslash and line feed escaped.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_written_whole_with_help_and_type() {
        let mut e = Exposition::default();
        e.family(
            "x_total",
            Kind::Counter,
            "Things.",
            vec![
                Sample::new(vec![("a", "1".into())], 3.0),
                Sample::new(vec![("a", "2".into()), ("b", "q\"\\\n".into())], 0.5),
            ],
        );
        e.family("empty", Kind::Gauge, "Nothing.", Vec::new());
        e.family(
            "lat",
            Kind::Summary,
            "L.",
            vec![
                Sample::new(vec![("quantile", "0.5".into())], f64::NAN),
                Sample {
                    suffix: "_count",
                    labels: vec![],
                    value: 2.0,
                },
            ],
        );
        assert_eq!(
            e.finish(),
            "# HELP x_total Things.\n# TYPE x_total counter\nx_total{a=\"1\"} 3\n\
             x_total{a=\"2\",b=\"q\\\"\\\\\\n\"} 0.5\n\
             # HELP lat L.\n# TYPE lat summary\nlat{quantile=\"0.5\"} NaN\nlat_count 2\n"
        );
    }

    #[test]
    fn values_are_spelled_as_prometheus_reads_them() {
        assert_eq!(format_value(1e20), "100000000000000000000");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(-3.0), "-3");
        assert_eq!(format_value(0.000123), "0.000123");
    }
}
