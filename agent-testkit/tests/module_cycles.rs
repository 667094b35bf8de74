//! No import cycle between the modules of any crate of the workspace.
//!
//! Each source file is a module. A path in it that names another module —
//! `use crate::a::b::Item`, `use super::b::{x, y}`, or the same path written
//! inline — is an edge between the two sibling modules under their closest
//! common parent (a child naming an item of its own parent, or a parent its
//! child, is the tree, not an edge). Within every parent the sibling graph
//! must have no cycle; a failure names each cycle and the lines that close it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module: its path below the crate's root (empty for the root).
type ModPath = Vec<String>;

/// An edge's evidence: the file and line of the path that makes it.
type Evidence = (PathBuf, usize, String);

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut problems = Vec::new();
    let mut crates = 0;
    for entry in fs::read_dir(root).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.join("lib.rs").is_file() && !src.join("main.rs").is_file() {
            continue;
        }
        crates += 1;
        problems.extend(cycles_of_crate(&src));
    }
    assert!(crates >= 10, "found only {crates} crates under {root:?}");
    assert!(
        problems.is_empty(),
        "import cycles between modules:\n{}",
        problems.join("\n")
    );
}

/// The cycles of one crate, as messages.
fn cycles_of_crate(src: &Path) -> Vec<String> {
    let files = module_files(src);
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    // parent -> (from child -> to child -> evidence)
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, Evidence>>> =
        BTreeMap::new();
    for (module, file) in &files {
        let text = fs::read_to_string(file).unwrap();
        for (line, path) in paths_in(&text) {
            let Some(target) = resolve(module, &path) else {
                continue;
            };
            let Some((parent, from, to)) = sibling_edge(module, &target, &modules) else {
                continue;
            };
            graphs
                .entry(parent)
                .or_default()
                .entry(from)
                .or_default()
                .entry(to)
                .or_insert_with(|| (file.clone(), line, path.join("::")));
        }
    }
    let mut problems = Vec::new();
    for (parent, graph) in &graphs {
        for cycle in cycles(graph) {
            let mut message = format!(
                "{}: {}",
                src.parent().unwrap().display(),
                describe_cycle(parent, &cycle)
            );
            for pair in cycle.windows(2) {
                let (file, line, path) = &graph[&pair[0]][&pair[1]];
                message.push_str(&format!("\n    {}:{line}: {path}", file.display()));
            }
            problems.push(message);
        }
    }
    problems
}

fn describe_cycle(parent: &[String], cycle: &[String]) -> String {
    let prefix = if parent.is_empty() {
        "crate".to_owned()
    } else {
        format!("crate::{}", parent.join("::"))
    };
    format!("under {prefix}: {}", cycle.join(" -> "))
}

/// Every module file of the crate whose root is `src`, by module path.
fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut files = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let mut parts: Vec<String> = relative
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            let last = parts.pop().unwrap();
            let stem = last.trim_end_matches(".rs");
            if parts.is_empty() && (stem == "lib" || stem == "main") {
                files.insert(Vec::new(), path);
                continue;
            }
            if stem != "mod" {
                parts.push(stem.to_owned());
            }
            files.insert(parts, path);
        }
    }
    files
}

/// The paths a file names that start at `crate`, `super` or `self`, with the
/// line of each: `use` trees expanded, comments and test modules left out.
fn paths_in(text: &str) -> Vec<(usize, Vec<String>)> {
    let code = without_tests(&without_comments(text));
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    let mut offset = 0;
    while let Some(at) = find_use(rest) {
        let start = offset + at;
        let Some(end) = code[start..].find(';') else {
            break;
        };
        let statement = &code[start + 4..start + end];
        let line = code[..start].matches('\n').count() + 1;
        for path in expand(statement.trim()) {
            paths.push((line, path));
        }
        offset = start + end + 1;
        rest = &code[offset..];
    }
    for (index, line) in code.lines().enumerate() {
        if line.trim_start().starts_with("use ") || line.trim_start().starts_with("pub use ") {
            continue;
        }
        for path in inline_paths(line) {
            paths.push((index + 1, path));
        }
    }
    paths
        .into_iter()
        .filter(|(_, path)| {
            matches!(
                path.first().map(String::as_str),
                Some("crate" | "super" | "self")
            )
        })
        .collect()
}

/// Where the next `use` statement starts in `text`.
fn find_use(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text[from..].find("use ") {
        let index = from + at;
        let before = text[..index].chars().next_back();
        if before.is_none_or(|c| c.is_whitespace() || c == ';' || c == '{' || c == '}') {
            return Some(index);
        }
        from = index + 4;
    }
    None
}

/// A `use` tree as its paths: `a::{b, c::{d, e}}` is `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let mut tree = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    for token in ["::", "{", "}", ","] {
        tree = tree
            .replace(&format!(" {token}"), token)
            .replace(&format!("{token} "), token);
    }
    let mut out = Vec::new();
    expand_into(&tree, &mut Vec::new(), &mut out);
    out
}

fn expand_into(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .filter(|part| !part.is_empty())
            .map(str::to_owned)
            .collect();
        let inner = &tree[open + 1..tree.len() - 1];
        let depth = prefix.len();
        prefix.extend(head);
        for part in split_top(inner) {
            expand_into(part, prefix, out);
        }
        prefix.truncate(depth);
        return;
    }
    let name = tree.split(" as ").next().unwrap_or(tree);
    let mut path = prefix.clone();
    path.extend(
        name.split("::")
            .filter(|part| !part.is_empty() && *part != "*")
            .map(str::to_owned),
    );
    if path.last().is_some_and(|last| last == "self") {
        path.pop();
    }
    out.push(path);
}

/// `a, b::{c, d}, e` split at its top-level commas.
fn split_top(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (index, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|part| !part.is_empty()).collect()
}

/// Paths written inline in a line of code: `crate::a::b`, `super::c::d(`.
fn inline_paths(line: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = line[from..].find(start) {
            let index = from + at;
            let before = line[..index].chars().next_back();
            from = index + start.len();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = line[index..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(
                path.split("::")
                    .filter(|part| !part.is_empty())
                    .map(str::to_owned)
                    .collect(),
            );
        }
    }
    paths
}

/// `text` without `//` and `/* */` comments (string contents are kept, which
/// is harmless: a path in a string is at worst an extra edge to check).
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && next == '/' {
                        break;
                    }
                    last = next;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// `text` up to its `#[cfg(test)]` module (tests sit at the end of a file by
/// this workspace's convention), lines kept so numbers stay true.
fn without_tests(text: &str) -> String {
    match text.find("#[cfg(test)]\nmod ") {
        Some(at) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

/// The absolute module path (and item) that `path`, written in `module`, names.
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut resolved: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut base = module.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|part| part == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            return Some(base);
        }
        _ => return None,
    };
    resolved.extend(path[1..].iter().cloned());
    Some(resolved)
}

/// The sibling edge `module` -> `target` makes: their closest common parent,
/// and the child of it on each side — `None` when one contains the other.
fn sibling_edge(
    module: &[String],
    target: &[String],
    modules: &BTreeSet<ModPath>,
) -> Option<(ModPath, String, String)> {
    // The longest prefix of `target` that is a module.
    let target_module: Vec<String> = (0..=target.len())
        .rev()
        .map(|len| target[..len].to_vec())
        .find(|prefix| modules.contains(prefix))?;
    let common = module
        .iter()
        .zip(&target_module)
        .take_while(|(a, b)| a == b)
        .count();
    let from = module.get(common)?;
    let to = target_module.get(common)?;
    Some((module[..common].to_vec(), from.clone(), to.clone()))
}

/// The cycles of `graph`, one per strongly connected component of more than
/// one module, each as a closed walk (`a -> b -> a`).
fn cycles(graph: &BTreeMap<String, BTreeMap<String, Evidence>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = graph
        .keys()
        .chain(graph.values().flat_map(BTreeMap::keys))
        .collect();
    let reaches = |from: &String, to: &String| -> Option<Vec<String>> {
        // Breadth-first path from `from` to `to`.
        let mut previous: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from]);
        let mut seen = BTreeSet::from([from]);
        while let Some(node) = queue.pop_front() {
            for next in graph.get(node).into_iter().flat_map(BTreeMap::keys) {
                if next == to {
                    let mut path = vec![to.clone(), node.clone()];
                    let mut at = node;
                    while let Some(back) = previous.get(at) {
                        path.push((*back).clone());
                        at = back;
                    }
                    path.reverse();
                    return Some(path);
                }
                if seen.insert(next) {
                    previous.insert(next, node);
                    queue.push_back(next);
                }
            }
        }
        None
    };
    let mut found = Vec::new();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    for node in nodes {
        if covered.contains(node) {
            continue;
        }
        if let Some(cycle) = reaches(node, node) {
            covered.extend(cycle.iter().cloned());
            found.push(cycle);
        }
    }
    found
}

#[test]
fn the_checker_sees_a_cycle_and_expands_use_trees() {
    assert_eq!(
        expand("super::{a::X, b::{c, d as e}}"),
        vec![
            vec!["super", "a", "X"],
            vec!["super", "b", "c"],
            vec!["super", "b", "d"],
        ]
    );
    let graph: BTreeMap<String, BTreeMap<String, Evidence>> =
        [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]
            .into_iter()
            .fold(BTreeMap::new(), |mut graph, (from, to)| {
                graph
                    .entry(from.to_owned())
                    .or_default()
                    .insert(to.to_owned(), (PathBuf::new(), 0, String::new()));
                graph
            });
    assert_eq!(cycles(&graph), vec![vec!["a", "b", "c", "a"]]);
    let modules: BTreeSet<ModPath> = [
        vec![],
        vec!["engine".to_owned()],
        vec!["engine".to_owned(), "driver".to_owned()],
        vec!["engine".to_owned(), "lease".to_owned()],
    ]
    .into_iter()
    .collect();
    let lease = vec!["engine".to_owned(), "lease".to_owned()];
    let target = resolve(&lease, &["super".into(), "driver".into(), "Driver".into()]).unwrap();
    assert_eq!(
        sibling_edge(&lease, &target, &modules),
        Some((
            vec!["engine".to_owned()],
            "lease".to_owned(),
            "driver".to_owned()
        ))
    );
    // A child naming its parent's own item is the tree, not an edge.
    let target = resolve(&lease, &["super".into(), "Engine".into()]).unwrap();
    assert_eq!(sibling_edge(&lease, &target, &modules), None);
}
