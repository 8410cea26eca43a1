//! Reading the trace's two CSV kinds: the node list and the task (pod)
//! lists. Every error names the file, the line and, for a bad value, the
//! column (number and header name), because the files are large and a
//! message without a position is useless.
//!
//! Columns are found by their header name, not their position, so the
//! default task file (with `gpu_spec`, `qos` and times) and the multigpu50
//! file (without them) are read by one function.

use std::io::Read;
use std::path::Path;

use csv::StringRecord;

/// The node list's columns (`openb_node_list_gpu_node.csv`).
const NODE_COLUMNS: [&str; 5] = ["sn", "cpu_milli", "memory_mib", "gpu", "model"];
/// The task lists' columns that both files have; `gpu_spec` is optional.
const TASK_COLUMNS: [&str; 5] = ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"];
const GPU_SPEC: &str = "gpu_spec";

/// Bounds that keep every later sum exact in fleetq's milli-unit
/// quantities (a node or task of 16 TiB memory is far beyond any real one).
const MAX_MEMORY_MIB: u64 = 1 << 24;
const MAX_CPU_MILLI: u64 = 1 << 32;
/// GPUs of a node or task, or a task's GPU milli.
const MAX_SMALL: u64 = 1024;

/// One GPU node as the trace lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub sn: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub gpus: u32,
    pub model: String,
}

/// One task as the trace lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRow {
    pub name: String,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub num_gpu: u32,
    /// Thousandths of each GPU; below 1000 (with `num_gpu` 1) a share.
    pub gpu_milli: u32,
    /// GPU models the task accepts; empty: any.
    pub gpu_spec: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{file}, line {line}: {message}")]
    Line {
        file: String,
        line: u64,
        message: String,
    },
    #[error("{file}, line {line}, column {column} ({name}): {message}")]
    Field {
        file: String,
        line: u64,
        column: usize,
        name: String,
        message: String,
    },
}

/// Reads the node list at `path`.
pub fn nodes_file(path: &Path) -> Result<Vec<NodeRow>, ParseError> {
    nodes(open(path)?, &path.display().to_string())
}

/// Reads a task list at `path`.
pub fn tasks_file(path: &Path) -> Result<Vec<TaskRow>, ParseError> {
    tasks(open(path)?, &path.display().to_string())
}

fn open(path: &Path) -> Result<std::fs::File, ParseError> {
    std::fs::File::open(path).map_err(|e| ParseError::File {
        file: path.display().to_string(),
        message: format!("cannot open: {e}"),
    })
}

/// Reads a node list from `input`; `file` names it in errors.
pub fn nodes(input: impl Read, file: &str) -> Result<Vec<NodeRow>, ParseError> {
    let mut table = Table::new(input, file)?;
    let cols = table.columns(&NODE_COLUMNS)?;
    let mut out = Vec::new();
    while let Some(row) = table.next_row()? {
        out.push(NodeRow {
            sn: row.text(cols[0])?,
            cpu_milli: row.number(cols[1], MAX_CPU_MILLI)?,
            memory_mib: row.number(cols[2], MAX_MEMORY_MIB)?,
            gpus: row.small(cols[3])?,
            model: row.text(cols[4])?,
        });
    }
    Ok(out)
}

/// Reads a task list from `input`; `file` names it in errors.
pub fn tasks(input: impl Read, file: &str) -> Result<Vec<TaskRow>, ParseError> {
    let mut table = Table::new(input, file)?;
    let cols = table.columns(&TASK_COLUMNS)?;
    let spec = table.optional_column(GPU_SPEC);
    let mut out = Vec::new();
    while let Some(row) = table.next_row()? {
        let gpu_milli: u32 = row.small(cols[4])?;
        if gpu_milli > 1000 {
            return Err(row.bad(cols[4], "a GPU share is at most 1000 milli (one GPU)"));
        }
        out.push(TaskRow {
            name: row.text(cols[0])?,
            cpu_milli: row.number(cols[1], MAX_CPU_MILLI)?,
            memory_mib: row.number(cols[2], MAX_MEMORY_MIB)?,
            num_gpu: row.small(cols[3])?,
            gpu_milli,
            gpu_spec: spec.map(|c| row.models(c)).unwrap_or_default(),
        });
    }
    Ok(out)
}

/// A CSV file with its header, read record by record.
struct Table<R: Read> {
    reader: csv::Reader<R>,
    file: String,
    header: Vec<String>,
    record: StringRecord,
}

impl<R: Read> Table<R> {
    fn new(input: R, file: &str) -> Result<Self, ParseError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .from_reader(input);
        let header = reader
            .headers()
            .map_err(|e| csv_error(file, &e))?
            .iter()
            .map(|h| h.trim().to_string())
            .collect();
        Ok(Table {
            reader,
            file: file.to_string(),
            header,
            record: StringRecord::new(),
        })
    }

    /// The index of each of `names` in the header, or which one is missing.
    fn columns<const N: usize>(&self, names: &[&str; N]) -> Result<[usize; N], ParseError> {
        let mut out = [0; N];
        for (slot, name) in out.iter_mut().zip(names) {
            *slot = self.optional_column(name).ok_or_else(|| ParseError::Line {
                file: self.file.clone(),
                line: 1,
                message: format!(
                    "the header has no column {name:?} (it has: {})",
                    self.header.join(",")
                ),
            })?;
        }
        Ok(out)
    }

    fn optional_column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The next record, `None` at the end.
    fn next_row(&mut self) -> Result<Option<Row<'_>>, ParseError> {
        match self.reader.read_record(&mut self.record) {
            Ok(false) => Ok(None),
            Ok(true) => Ok(Some(Row {
                file: &self.file,
                header: &self.header,
                line: self.record.position().map_or(0, |p| p.line()),
                record: &self.record,
            })),
            Err(e) => Err(csv_error(&self.file, &e)),
        }
    }
}

/// A csv crate error with its line, where it knows one (a record with
/// the wrong number of fields, bytes that are not UTF-8).
fn csv_error(file: &str, e: &csv::Error) -> ParseError {
    let message = match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields, but the header has {expected_len}"),
        _ => e.to_string(),
    };
    match e.position() {
        Some(p) => ParseError::Line {
            file: file.to_string(),
            line: p.line(),
            message,
        },
        None => ParseError::File {
            file: file.to_string(),
            message,
        },
    }
}

/// One record, with what its errors need to say where they are.
struct Row<'t> {
    file: &'t str,
    header: &'t [String],
    line: u64,
    record: &'t StringRecord,
}

impl Row<'_> {
    fn field(&self, col: usize) -> &str {
        self.record.get(col).unwrap_or("").trim()
    }

    fn bad(&self, col: usize, message: impl Into<String>) -> ParseError {
        ParseError::Field {
            file: self.file.to_string(),
            line: self.line,
            column: col + 1,
            name: self.header.get(col).cloned().unwrap_or_default(),
            message: message.into(),
        }
    }

    fn text(&self, col: usize) -> Result<String, ParseError> {
        match self.field(col) {
            "" => Err(self.bad(col, "is empty")),
            s => Ok(s.to_string()),
        }
    }

    /// A whole number from 0 to `max`.
    fn number(&self, col: usize, max: u64) -> Result<u64, ParseError> {
        let s = self.field(col);
        let n: u64 = s
            .parse()
            .map_err(|_| self.bad(col, format!("expected a whole number, found {s:?}")))?;
        if n > max {
            return Err(self.bad(col, format!("{n} is larger than {max}")));
        }
        Ok(n)
    }

    /// A small count (GPUs, GPU milli).
    fn small(&self, col: usize) -> Result<u32, ParseError> {
        let n = self.number(col, MAX_SMALL)?;
        u32::try_from(n).map_err(|_| self.bad(col, "too large"))
    }

    /// `V100M16|V100M32`: the models, in the order given.
    fn models(&self, col: usize) -> Vec<String> {
        self.field(col)
            .split('|')
            .map(str::trim)
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_task_kinds_read_by_header_name() {
        let default = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n\
                       t0,1000,2048,1,460,V100M16|V100M32,LS\n\
                       t1,2000,4096,2,1000,,BE\n";
        let rows = tasks(default.as_bytes(), "default.csv").unwrap();
        assert_eq!(rows[0].gpu_spec, ["V100M16", "V100M32"]);
        assert_eq!(rows[0].gpu_milli, 460);
        assert!(rows[1].gpu_spec.is_empty());
        let multi = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nt0,1000,2048,8,1000\n";
        let rows = tasks(multi.as_bytes(), "multi.csv").unwrap();
        assert_eq!(rows[0].num_gpu, 8);
        assert!(rows[0].gpu_spec.is_empty());
    }

    #[test]
    fn a_bad_value_names_file_line_and_column() {
        let input = "sn,cpu_milli,memory_mib,gpu,model\n\
                     n0,64000,262144,2,P100\n\
                     n1,64000,262144,two,P100\n";
        let e = nodes(input.as_bytes(), "nodes.csv").unwrap_err();
        assert_eq!(
            e.to_string(),
            "nodes.csv, line 3, column 4 (gpu): expected a whole number, found \"two\""
        );
    }
}
