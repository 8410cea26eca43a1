//! What `get` and `describe` print: plain views of the API's messages, as
//! tables, JSON or YAML.

use std::collections::BTreeMap;

use clap::ValueEnum;
use fleetq_proto::v1 as pb;
use serde::Serialize;

/// `-o`: how a command prints what it got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// An aligned table (or a short report).
    #[default]
    Table,
    /// JSON, pretty-printed.
    Json,
    /// YAML.
    Yaml,
    /// The table with extra columns (where a command has any).
    Wide,
    /// fleetq's own status view as JSON, where it differs from the Kueue
    /// object `json` prints (workloads: ids, states, times in ms); for
    /// scripts. Elsewhere the same as `json`.
    #[value(name = "fleetq-json")]
    FleetqJson,
}

impl Output {
    /// Table or wide: text for people rather than JSON or YAML.
    pub fn is_table(self) -> bool {
        matches!(self, Output::Table | Output::Wide)
    }
}

/// A workload as `get workloads -o fleetq-json` prints it: fleetq's view.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadView {
    pub id: u64,
    pub namespace: String,
    pub name: String,
    pub queue: String,
    pub cluster_queue: String,
    pub priority: i32,
    pub priority_class: String,
    /// Who submitted it; empty when unknown.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub submitted_by: String,
    pub state: String,
    pub cluster: String,
    /// Pod set -> resource -> flavor.
    pub flavors: BTreeMap<String, BTreeMap<String, String>>,
    pub reason: String,
    pub reason_kind: String,
    pub requests: String,
    pub epoch: u64,
    pub created_at_ms: u64,
    pub admitted_at_ms: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub position: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl From<&pb::WorkloadStatus> for WorkloadView {
    fn from(w: &pb::WorkloadStatus) -> Self {
        WorkloadView {
            id: w.id,
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            queue: w.queue.clone(),
            cluster_queue: w.cluster_queue.clone(),
            priority: w.priority,
            priority_class: w.priority_class.clone(),
            submitted_by: w.submitted_by.clone(),
            state: w.state.clone(),
            cluster: w.cluster.clone(),
            flavors: w
                .flavors
                .iter()
                .map(|p| (p.name.clone(), p.flavors.clone().into_iter().collect()))
                .collect(),
            reason: w.reason.clone(),
            reason_kind: w.reason_kind.clone(),
            requests: w.requests.clone(),
            epoch: w.epoch,
            created_at_ms: w.created_at_ms,
            admitted_at_ms: w.admitted_at_ms,
            position: w.position,
        }
    }
}

/// Prints rows as an aligned table with a header.
pub fn print_table(header: &[&str], rows: &[Vec<String>]) {
    match output_width() {
        Some(width) => print!("{}", format_table(header, &fit_rows(header, rows, width))),
        None => print!("{}", format_table(header, rows)),
    }
}

/// The width a table must fit: `COLUMNS` when set (as `ls` reads it),
/// else the terminal's when stdout is one; `None` when piped, so that a
/// script gets whole lines, as kubectl gives them.
pub fn output_width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
    {
        return Some(columns);
    }
    terminal_size::terminal_size().map(|(w, _)| usize::from(w.0))
}

/// The least room the last column (a reason, a description) keeps when a
/// table is fitted: below this the line wraps instead.
const MIN_LAST_COLUMN: usize = 24;

/// `rows` with the last column shortened so each line fits `width`,
/// keeping a reason's numbers ([`shorten_reason`]); unchanged where the
/// other columns leave less than [`MIN_LAST_COLUMN`].
pub fn fit_rows(header: &[&str], rows: &[Vec<String>], width: usize) -> Vec<Vec<String>> {
    let last = header.len().saturating_sub(1);
    let widths = column_widths(header, rows);
    let before: usize = widths.iter().take(last).map(|w| w + 3).sum();
    let room = width.saturating_sub(before).max(MIN_LAST_COLUMN);
    rows.iter()
        .map(|row| {
            let mut row = row.clone();
            if let Some(cell) = row.get_mut(last) {
                *cell = shorten_reason(cell, room);
            }
            row
        })
        .collect()
}

/// Rows as an aligned table with a header, one line each.
pub fn format_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let widths = column_widths(header, rows);
    let mut text = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        text.push_str(&format_row(row, &widths));
        text.push('\n');
    }
    text
}

/// Each column's width in a table of `header` and `rows`.
pub fn column_widths(header: &[&str], rows: &[Vec<String>]) -> Vec<usize> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    widths
}

/// One line of a table: each cell but the last padded to its column's
/// width, three spaces between columns, no trailing space.
pub fn format_row(row: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    for (i, cell) in row.iter().enumerate() {
        if i + 1 == row.len() {
            out.push_str(cell);
        } else {
            let w = widths.get(i).copied().unwrap_or(0);
            out.push_str(&format!("{cell:<w$}   "));
        }
    }
    out.trim_end().to_string()
}

/// Prints `value` as JSON or YAML.
pub fn print_structured<T: Serialize>(value: &T, output: Output) -> Result<(), String> {
    let text = match output {
        Output::Json | Output::FleetqJson => {
            serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
        }
        Output::Yaml | Output::Table | Output::Wide => {
            serde_norway::to_string(value).map_err(|e| e.to_string())?
        }
    };
    println!("{}", text.trim_end());
    Ok(())
}

pub fn age(ms: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    if ms == 0 || ms > now {
        return "-".into();
    }
    let s = (now - ms) / 1000;
    match s {
        0..=119 => format!("{s}s"),
        120..=7199 => format!("{}m", s / 60),
        7200..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// A pending reason cut to about `max` characters for a table, never
/// before its numbers: the words from the first one with a digit to the
/// end stay whole, and the text before them is cut instead
/// ("insufficient unused quota for nvidia.com/gpu… 8 more needed
/// (requested 16, available 8)"). A reason whose numbers alone leave no
/// room for a few words before them is left whole; one without numbers
/// is cut at its end.
pub fn shorten_reason(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    // The numbers are the last clause's: after the last ": " when there
    // is one (a flavor named h100-80gb earlier is not where they start).
    let clause = text.rfind(": ").map_or(0, |i| i + 2);
    let Some(digit) = text[clause..]
        .find(|c: char| c.is_ascii_digit())
        .map(|i| clause + i)
        .or_else(|| text.find(|c: char| c.is_ascii_digit()))
    else {
        return truncate(text, max);
    };
    let start = text[..digit].rfind(' ').map_or(0, |i| i + 1);
    let tail = &text[start..];
    // "… " between the two parts.
    let room = max.saturating_sub(tail.chars().count() + 2);
    if room < 12 {
        return text.to_string();
    }
    let head: String = text[..start].chars().take(room).collect();
    format!("{}… {tail}", head.trim_end())
}

pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let cut: String = text.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::{fit_rows, format_table, shorten_reason};

    #[test]
    fn a_fitted_table_fits_and_keeps_the_numbers() {
        let header = ["NAME", "STATE", "REASON"];
        let reason = "insufficient unused quota for nvidia.com/gpu in flavor h100-80gb in ClusterQueue \"team-a\": 4 more needed (requested 4, available 0)";
        let rows = vec![vec![
            "waiting".to_string(),
            "Pending".to_string(),
            reason.to_string(),
        ]];
        let text = format_table(&header, &fit_rows(&header, &rows, 80));
        for line in text.lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
        assert!(
            text.contains("4 more needed (requested 4, available 0)"),
            "{text}"
        );
        // Wide enough: unchanged.
        assert_eq!(fit_rows(&header, &rows, 400), rows);
    }

    #[test]
    fn a_shortened_reason_keeps_its_numbers() {
        let reason = "insufficient unused quota for nvidia.com/gpu in ClusterQueue \"research-team-a\": 8 more needed (requested 16, available 8)";
        let short = shorten_reason(reason, 90);
        assert!(short.chars().count() <= 90, "{short}");
        assert!(
            short.ends_with("8 more needed (requested 16, available 8)"),
            "{short}"
        );
        assert!(short.starts_with("insufficient unused quota"), "{short}");
        // Numbers from the start: nothing can go, so nothing does.
        let early = "requests 16 of h100-80gb/nvidia.com/gpu but ClusterQueue \"team-a\" can get at most 8 even with its cohort idle";
        assert_eq!(shorten_reason(early, 90), early);
        // Short ones, and ones without numbers, as before.
        assert_eq!(shorten_reason("waiting", 90), "waiting");
        assert_eq!(shorten_reason(&"x".repeat(100), 10).chars().count(), 10);
    }
}
