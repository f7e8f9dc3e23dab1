//! Quiver plugin `time`: the current time in any IANA time zone, time zone
//! conversion and date arithmetic (the IANA database is bundled).

use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, ZonedDateTime as Zoned, civil};
use quiver_plugin_api::{PluginManifest, ToolError, ToolManifest, str_arg};
use serde_json::{Value, json};

fn manifest() -> PluginManifest {
    PluginManifest::new("time", env!("CARGO_PKG_VERSION"))
        .tool(ToolManifest::new(
            "time_now",
            "The current date and time in an IANA time zone (default UTC), with its UTC offset and weekday.",
            json!({"type": "object", "properties": {
                "zone": {"type": "string", "description": "IANA zone, e.g. Europe/Paris."}
            }}),
        ))
        .tool(ToolManifest::new(
            "time_convert",
            "Convert a date-time from one time zone to another. `datetime` is an RFC 3339 timestamp or a civil date-time like 2025-03-30T02:30 read in `from_zone`.",
            json!({"type": "object", "properties": {
                "datetime": {"type": "string"},
                "from_zone": {"type": "string", "description": "Zone of a civil date-time (default UTC)."},
                "to_zone": {"type": "string"}
            }, "required": ["datetime", "to_zone"]}),
        ))
        .tool(ToolManifest::new(
            "time_add",
            "Add a duration (ISO 8601 like P1M2DT3H, or friendly like '2 days 3 hours'; negative to subtract) to a date-time in a zone, respecting DST.",
            json!({"type": "object", "properties": {
                "datetime": {"type": "string"},
                "zone": {"type": "string", "description": "Default UTC."},
                "duration": {"type": "string"}
            }, "required": ["datetime", "duration"]}),
        ))
        .tool(ToolManifest::new(
            "time_diff",
            "The duration between two date-times (RFC 3339 or civil in `zone`), in days, hours, minutes and seconds.",
            json!({"type": "object", "properties": {
                "start": {"type": "string"},
                "end": {"type": "string"},
                "zone": {"type": "string", "description": "Default UTC."}
            }, "required": ["start", "end"]}),
        ))
}

fn zone(name: Option<&str>) -> Result<TimeZone, ToolError> {
    match name {
        None | Some("UTC") | Some("utc") => Ok(TimeZone::UTC),
        Some(name) => TimeZone::get(name)
            .map_err(|e| ToolError::new(format!("unknown time zone `{name}`: {e}"))),
    }
}

fn parse_in(text: &str, tz: &TimeZone) -> Result<Zoned, ToolError> {
    if let Ok(zoned) = text.parse::<Zoned>() {
        return Ok(zoned.with_time_zone(tz.clone()));
    }
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts.to_zoned_datetime(tz.clone()));
    }
    let civil: civil::DateTime = text
        .parse()
        .or_else(|_| text.parse::<civil::Date>().map(|d| d.at(0, 0, 0, 0)))
        .map_err(|e| ToolError::new(format!("cannot read `{text}` as a date-time: {e}")))?;
    civil
        .to_zoned_datetime(tz.clone())
        .map_err(|e| ToolError::new(e.to_string()))
}

fn describe(z: &Zoned) -> Value {
    json!({
        "datetime": z.to_string(),
        "rfc3339": z.timestamp().to_string(),
        "zone": z.time_zone().iana_name().unwrap_or("UTC"),
        "offset": z.offset().to_string(),
        "weekday": format!("{:?}", z.weekday()),
        "unix_seconds": z.timestamp().as_second(),
    })
}

fn call(tool: &str, arguments: Value) -> Result<Value, ToolError> {
    match tool {
        "time_now" => {
            let tz = zone(arguments["zone"].as_str())?;
            Ok(describe(&Timestamp::now().to_zoned_datetime(tz)))
        }
        "time_convert" => {
            let from = zone(arguments["from_zone"].as_str())?;
            let to = zone(Some(str_arg(&arguments, "to_zone")?))?;
            let zoned = parse_in(str_arg(&arguments, "datetime")?, &from)?;
            Ok(describe(&zoned.with_time_zone(to)))
        }
        "time_add" => {
            let tz = zone(arguments["zone"].as_str())?;
            let zoned = parse_in(str_arg(&arguments, "datetime")?, &tz)?;
            let text = str_arg(&arguments, "duration")?;
            let span: Span = text
                .parse()
                .map_err(|e| ToolError::new(format!("cannot read duration `{text}`: {e}")))?;
            let result = zoned
                .checked_add(span)
                .map_err(|e| ToolError::new(e.to_string()))?;
            Ok(describe(&result))
        }
        "time_diff" => {
            let tz = zone(arguments["zone"].as_str())?;
            let start = parse_in(str_arg(&arguments, "start")?, &tz)?;
            let end = parse_in(str_arg(&arguments, "end")?, &tz)?;
            let seconds = end.timestamp().as_second() - start.timestamp().as_second();
            let abs = seconds.unsigned_abs();
            Ok(json!({
                "seconds": seconds,
                "days": abs / 86_400,
                "hours": abs % 86_400 / 3600,
                "minutes": abs % 3600 / 60,
                "remaining_seconds": abs % 60,
                "negative": seconds < 0,
            }))
        }
        other => Err(ToolError::unknown_tool(other)),
    }
}

quiver_plugin_api::export_plugin!(manifest, call);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn converts_across_zones() {
        let out = call(
            "time_convert",
            json!({"datetime": "2025-01-15T12:00:00Z", "to_zone": "Asia/Tokyo"}),
        )
        .unwrap();
        assert_eq!(out["offset"], "+09");
        assert!(
            out["datetime"]
                .as_str()
                .unwrap()
                .starts_with("2025-01-15T21:00:00")
        );
    }

    #[test]
    fn adds_across_dst_and_diffs() {
        let out = call(
            "time_add",
            json!({"datetime": "2025-03-29T12:00", "zone": "Europe/Paris", "duration": "1 day"}),
        )
        .unwrap();
        assert!(
            out["datetime"]
                .as_str()
                .unwrap()
                .starts_with("2025-03-30T12:00:00+02:00")
        );
        let diff = call(
            "time_diff",
            json!({"start": "2025-01-01", "end": "2025-01-02T01:00"}),
        )
        .unwrap();
        assert_eq!(
            (diff["days"].as_u64(), diff["hours"].as_u64()),
            (Some(1), Some(1))
        );
        assert!(call("time_now", json!({"zone": "Mars/Base"})).is_err());
    }
}
