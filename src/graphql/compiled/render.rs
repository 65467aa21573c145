//! A compiled list's answer written as JSON, field by field in the order the document asks:
//! the bytes async-graphql's executor would send for the same page. One generic writer: each
//! field's value comes from its getter ([`super::fields`]), a leaf through the conversion the
//! executor uses (`InputType::to_value` of the field's GraphQL type, then `ConstValue`'s
//! serialization), an object through its selection. Anything the executor would answer with
//! an error (a null where the schema says non-null, a stored value it cannot read) is an
//! error here too, and the executor answers instead.

use async_graphql::Value;

use crate::domain::{DomainError, DomainResult};

use super::fields::{Node, Out, Page};
use super::plan::{Field, Object, Plan, RootKind};

/// The whole response body, `{"data":{…}}`, its roots in the document's order.
pub(super) fn body(plan: &Plan, page: &Page<'_>) -> DomainResult<Vec<u8>> {
    let mut out = Vec::with_capacity(256 + 512 * page.page.rows.len());
    out.extend_from_slice(b"{\"data\":{");
    for (i, root) in plan.roots.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&root.key);
        let node = match root.kind {
            RootKind::Sessions => Node::Connection,
            RootKind::Counts => Node::Counts(page.counts.ok_or_else(|| DomainError::invariant("counts not read"))?),
        };
        object(&mut out, &root.selection, &node, page)?;
    }
    out.extend_from_slice(b"}}");
    Ok(out)
}

/// `{"key":value,…}`.
fn object<'a>(out: &mut Vec<u8>, selection: &Object, node: &Node<'a>, page: &Page<'a>) -> DomainResult<()> {
    out.push(b'{');
    for (i, (key, field)) in selection.fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(key);
        match field {
            Field::Typename(name) => out.extend_from_slice(name),
            Field::Get { get, nullable, list, object: selection } => {
                let value = get(node, page)?;
                if matches!(value, Out::One(_)) && *list || matches!(value, Out::Many(_)) && !*list {
                    return Err(DomainError::invariant("a getter of another shape than its field"));
                }
                write(out, value, *nullable, selection.as_ref(), page)?;
            }
        }
    }
    out.push(b'}');
    Ok(())
}

fn write<'a>(
    out: &mut Vec<u8>,
    value: Out<'a>,
    nullable: bool,
    selection: Option<&Object>,
    page: &Page<'a>,
) -> DomainResult<()> {
    let selection = || selection.ok_or_else(|| DomainError::invariant("an object without its selection"));
    match value {
        Out::Value(Value::Null) | Out::Text(None) | Out::Null if !nullable => {
            Err(DomainError::invariant("null where the schema says non-null"))
        }
        Out::Value(v) => json(out, &v),
        Out::Text(t) => json(out, &t),
        Out::Null => {
            out.extend_from_slice(b"null");
            Ok(())
        }
        Out::One(node) => object(out, selection()?, &node, page),
        Out::Many(nodes) => {
            let selection = selection()?;
            out.push(b'[');
            for (i, node) in nodes.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                object(out, selection, node, page)?;
            }
            out.push(b']');
            Ok(())
        }
    }
}

fn json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> DomainResult<()> {
    serde_json::to_writer(&mut *out, value).map_err(|e| DomainError::invariant(e.to_string()))
}
