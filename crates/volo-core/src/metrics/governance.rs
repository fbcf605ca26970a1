//! The governance values in force, read at each scrape from the live handles.

use std::fmt;
use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabel, EncodeLabelSet, EncodeMetric, LabelSetEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::governance::{Report, WeakGovernance};
use crate::transport::lock;

/// The handles watched; the dead are forgotten at the next scrape.
#[derive(Default)]
pub(super) struct Watched {
    handles: Mutex<Vec<WeakGovernance>>,
}

impl fmt::Debug for Watched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watched").finish_non_exhaustive()
    }
}

impl Watched {
    pub(super) fn watch(&self, handle: WeakGovernance) {
        lock(&self.handles).push(handle);
    }

    fn reports(&self) -> Vec<Report> {
        let mut reports = Vec::new();
        lock(&self.handles).retain(|h| match h.report() {
            Some(r) => {
                reports.push(r);
                true
            }
            None => false,
        });
        reports
    }
}

/// `{side, service, method, setting}`.
struct ValueLabels<'a> {
    side: &'static str,
    service: &'a str,
    method: &'a str,
    setting: &'static str,
}

impl EncodeLabelSet for ValueLabels<'_> {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        ("side", self.side).encode(e.encode_label())?;
        ("service", self.service).encode(e.encode_label())?;
        ("method", self.method).encode(e.encode_label())?;
        ("setting", self.setting).encode(e.encode_label())
    }
}

/// `{side, service, category, result}`.
struct UpdateLabels<'a> {
    side: &'static str,
    service: &'a str,
    category: &'static str,
    result: &'static str,
}

impl EncodeLabelSet for UpdateLabels<'_> {
    fn encode(&self, e: &mut LabelSetEncoder<'_>) -> fmt::Result {
        ("side", self.side).encode(e.encode_label())?;
        ("service", self.service).encode(e.encode_label())?;
        ("category", self.category).encode(e.encode_label())?;
        ("result", self.result).encode(e.encode_label())
    }
}

impl Collector for Watched {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let reports = self.reports();
        let mut values = encoder.encode_descriptor(
            "rpc_governance_value",
            "Governance values in force (from a config center), by side, service, method \
             and setting; 0 is none",
            None,
            MetricType::Gauge,
        )?;
        for r in &reports {
            for s in &r.settings {
                let labels = ValueLabels {
                    side: r.side,
                    service: &r.service,
                    method: &s.method,
                    setting: s.name,
                };
                ConstGauge::new(s.value).encode(values.encode_family(&labels)?)?;
            }
        }
        let mut updates = encoder.encode_descriptor(
            "rpc_governance_updates",
            "Governance values applied and refused, by side, service and category",
            None,
            MetricType::Counter,
        )?;
        for r in &reports {
            for &(category, applied, refused) in &r.updates {
                for (result, n) in [("applied", applied), ("refused", refused)] {
                    let labels = UpdateLabels {
                        side: r.side,
                        service: &r.service,
                        category,
                        result,
                    };
                    ConstCounter::new(n).encode(updates.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}
