//! Quiver plugin `time`: the current time in any IANA time zone, time zone
//! conversion and date arithmetic (the IANA database is bundled).

use jiff::tz::TimeZone;
use jiff::{Span, Timestamp, ZonedDateTime as Zoned, civil};
use quiver_plugin_api::{JsonSchema, ToolError, tool};
use serde::{Deserialize, Serialize};

fn zone(field: &str, name: Option<&str>) -> Result<TimeZone, ToolError> {
    match name {
        None | Some("UTC") | Some("utc") => Ok(TimeZone::UTC),
        Some(name) => TimeZone::get(name).map_err(|e| {
            ToolError::invalid_argument(field, format!("unknown time zone `{name}`: {e}"))
        }),
    }
}

fn parse_in(field: &str, text: &str, tz: &TimeZone) -> Result<Zoned, ToolError> {
    if let Ok(zoned) = text.parse::<Zoned>() {
        return Ok(zoned.with_time_zone(tz.clone()));
    }
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(ts.to_zoned_datetime(tz.clone()));
    }
    let civil: civil::DateTime = text
        .parse()
        .or_else(|_| text.parse::<civil::Date>().map(|d| d.at(0, 0, 0, 0)))
        .map_err(|e| {
            ToolError::invalid_argument(field, format!("cannot read `{text}` as a date-time: {e}"))
        })?;
    civil
        .to_zoned_datetime(tz.clone())
        .map_err(|e| ToolError::invalid_argument(field, e.to_string()))
}

/// A date-time in a zone.
#[derive(Serialize, JsonSchema)]
struct Described {
    /// The zoned date-time (RFC 9557, with the zone in brackets).
    datetime: String,
    /// The same instant in UTC, RFC 3339.
    rfc3339: String,
    /// The IANA zone.
    zone: String,
    /// The UTC offset there and then.
    offset: String,
    /// The weekday there and then.
    weekday: String,
    /// Seconds since the Unix epoch.
    unix_seconds: i64,
}

fn describe(z: &Zoned) -> Described {
    Described {
        datetime: z.to_string(),
        rfc3339: z.timestamp().to_string(),
        zone: z.time_zone().iana_name().unwrap_or("UTC").to_owned(),
        offset: z.offset().to_string(),
        weekday: format!("{:?}", z.weekday()),
        unix_seconds: z.timestamp().as_second(),
    }
}

/// Arguments of `time_now`.
#[derive(Deserialize, JsonSchema)]
struct NowArgs {
    /// IANA zone, e.g. Europe/Paris.
    #[serde(default)]
    zone: Option<String>,
}

/// The current date and time in an IANA time zone (default UTC), with its UTC offset and weekday.
#[tool(read_only, open_world = false)]
fn time_now(args: NowArgs) -> Result<Described, ToolError> {
    let tz = zone("zone", args.zone.as_deref())?;
    Ok(describe(&Timestamp::now().to_zoned_datetime(tz)))
}

/// Arguments of `time_convert`.
#[derive(Deserialize, JsonSchema)]
struct ConvertArgs {
    /// An RFC 3339 timestamp, or a civil date-time read in `from_zone`.
    datetime: String,
    /// Zone of a civil date-time (default UTC).
    #[serde(default)]
    from_zone: Option<String>,
    /// The zone to convert to.
    to_zone: String,
}

/// Convert a date-time from one time zone to another. `datetime` is an RFC 3339 timestamp or a civil date-time like 2025-03-30T02:30 read in `from_zone`.
#[tool(read_only, idempotent, open_world = false)]
fn time_convert(args: ConvertArgs) -> Result<Described, ToolError> {
    let from = zone("from_zone", args.from_zone.as_deref())?;
    let to = zone("to_zone", Some(&args.to_zone))?;
    let zoned = parse_in("datetime", &args.datetime, &from)?;
    Ok(describe(&zoned.with_time_zone(to)))
}

/// Arguments of `time_add`.
#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// An RFC 3339 timestamp, or a civil date-time read in `zone`.
    datetime: String,
    /// Default UTC.
    #[serde(default)]
    zone: Option<String>,
    /// ISO 8601 (P1M2DT3H) or friendly ("2 days 3 hours"); negative to subtract.
    duration: String,
}

/// Add a duration (ISO 8601 like P1M2DT3H, or friendly like '2 days 3 hours'; negative to subtract) to a date-time in a zone, respecting DST.
#[tool(read_only, idempotent, open_world = false)]
fn time_add(args: AddArgs) -> Result<Described, ToolError> {
    let tz = zone("zone", args.zone.as_deref())?;
    let zoned = parse_in("datetime", &args.datetime, &tz)?;
    let span: Span = args.duration.parse().map_err(|e| {
        ToolError::invalid_argument(
            "duration",
            format!("cannot read duration `{}`: {e}", args.duration),
        )
    })?;
    let result = zoned
        .checked_add(span)
        .map_err(|e| ToolError::failed(e.to_string()))?;
    Ok(describe(&result))
}

/// Arguments of `time_diff`.
#[derive(Deserialize, JsonSchema)]
struct DiffArgs {
    /// The first date-time (RFC 3339, or civil in `zone`).
    start: String,
    /// The second date-time (RFC 3339, or civil in `zone`).
    end: String,
    /// Default UTC.
    #[serde(default)]
    zone: Option<String>,
}

/// The duration from `start` to `end`.
#[derive(Serialize, JsonSchema)]
struct Difference {
    /// Signed total seconds.
    seconds: i64,
    /// Whole days of the absolute difference.
    days: u64,
    /// Hours past the days.
    hours: u64,
    /// Minutes past the hours.
    minutes: u64,
    /// Seconds past the minutes.
    remaining_seconds: u64,
    /// Whether `end` is before `start`.
    negative: bool,
}

/// The duration between two date-times (RFC 3339 or civil in `zone`), in days, hours, minutes and seconds.
#[tool(read_only, idempotent, open_world = false)]
fn time_diff(args: DiffArgs) -> Result<Difference, ToolError> {
    let tz = zone("zone", args.zone.as_deref())?;
    let start = parse_in("start", &args.start, &tz)?;
    let end = parse_in("end", &args.end, &tz)?;
    let seconds = end.timestamp().as_second() - start.timestamp().as_second();
    let abs = seconds.unsigned_abs();
    Ok(Difference {
        seconds,
        days: abs / 86_400,
        hours: abs % 86_400 / 3600,
        minutes: abs % 3600 / 60,
        remaining_seconds: abs % 60,
        negative: seconds < 0,
    })
}

quiver_plugin_api::plugin! {
    name: "time",
    tools: [time_now, time_convert, time_add, time_diff],
}
