//! Parsing errors name the file, the line and the column, on files the
//! test writes itself in the trace's formats.

use std::io::Write;

use fleetq_trace::parse::{nodes_file, tasks_file, ParseError};

fn file(contents: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(contents.as_bytes()).expect("write");
    f
}

#[test]
fn a_bad_number_names_line_and_column() {
    let f = file(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         p0,12000,16384,1,1000,,LS,Running,0,1,0\n\
         p1,6000,12288,1,460,,LS,Running,1,2,1\n\
         p2,6000,-5,1,460,,LS,Running,1,2,1\n",
    );
    let e = tasks_file(f.path()).unwrap_err();
    let ParseError::Field {
        line, column, name, ..
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!((*line, *column, name.as_str()), (4, 3, "memory_mib"));
    let shown = e.to_string();
    assert!(
        shown.starts_with(&f.path().display().to_string()),
        "{shown}"
    );
    assert!(shown.contains("line 4, column 3 (memory_mib)"), "{shown}");
}

#[test]
fn a_share_above_one_gpu_is_refused() {
    let f = file("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1500\n");
    let e = tasks_file(f.path()).unwrap_err().to_string();
    assert!(e.contains("line 2, column 5 (gpu_milli)"), "{e}");
}

#[test]
fn a_short_record_names_its_line() {
    let f = file("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,64000,262144\n");
    let e = nodes_file(f.path()).unwrap_err().to_string();
    assert!(e.contains("line 3: 3 fields, but the header has 5"), "{e}");
}

#[test]
fn a_missing_column_is_named() {
    let f = file("sn,cpu_milli,memory_mib,gpus,model\nn0,64000,262144,2,P100\n");
    let e = nodes_file(f.path()).unwrap_err().to_string();
    assert!(
        e.contains("line 1: the header has no column \"gpu\""),
        "{e}"
    );
}

#[test]
fn an_empty_model_is_refused() {
    let f = file("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,\n");
    let e = nodes_file(f.path()).unwrap_err().to_string();
    assert!(e.contains("line 2, column 5 (model): is empty"), "{e}");
}

#[test]
fn a_missing_file_is_named() {
    let e = nodes_file(std::path::Path::new("/nonexistent/nodes.csv"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/nonexistent/nodes.csv: cannot open"), "{e}");
}
