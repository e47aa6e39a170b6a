//! Column defaults (`allowColumnDefaults`): the Spark SQL text Delta keeps in a field's
//! `CURRENT_DEFAULT` and `EXISTS_DEFAULT`, read into the value Spark makes of it. One grammar
//! for every target: the mirror states the value as an Iceberg literal
//! (`lakemirror_plan::schema::default_literal`), lakebase as a PostgreSQL `DEFAULT`
//! (`lakemirror_lakebase::defaults`). Each target only renders.
//!
//! Spark parses the text again whenever a writer needs the default
//! (`ResolveDefaultColumns.analyze`: `parseExpression`, then constant folding and a cast to
//! the column's type), so the text means what the writer's Spark reads in it. Only Spark's
//! `constant`s are read here; anything else (a function call such as `current_date()`, an
//! expression such as `1 + 1`, a comment) reads as None and no target carries it.
//!
//! Spark's grammar, as this module follows it:
//! - Tokens: `STRING_LITERAL`, `DOUBLEQUOTED_STRING`, the number tokens (`1Y`, `2S`, `3`,
//!   `4L`, `1.5`, `1e3`, `1.5F`, `1.5D`, `1.5BD`), keywords in any case
//!   (<https://github.com/apache/spark/blob/00e2e62d49d13160174b7a338d8106b5ecd0d25c/sql/api/src/main/antlr4/org/apache/spark/sql/catalyst/parser/SqlBaseLexer.g4#L513-L564>).
//! - `constant`: `NULL`, a `number` (`MINUS?` then a number token), `TRUE`/`FALSE`,
//!   `literalType stringLit` (`DATE`, `TIMESTAMP`, `TIMESTAMP_LTZ`, `TIMESTAMP_NTZ`, `X`
//!   then one string) and `stringLit+`: adjacent strings are one string, concatenated
//!   (<https://github.com/apache/spark/blob/0032cebe77e7705615369f6ed3b664346f45cd7b/sql/api/src/main/antlr4/org/apache/spark/sql/catalyst/parser/SqlBaseParser.g4>,
//!   rules `constant`, `literalType`, `number`, `stringLit`).
//! - The value of each: `AstBuilder.visitTypeConstructor` (an odd number of hex digits gets a
//!   leading `0`), `visitIntegerLiteral` (an int if it fits, else a bigint, else a decimal),
//!   `numericLiteral` (a suffixed number out of its type's range is an error)
//!   (<https://github.com/apache/spark/blob/master/sql/catalyst/src/main/scala/org/apache/spark/sql/catalyst/parser/AstBuilder.scala>).
//! - Escapes in strings: `SparkParserUtils.unescapeSQLString` (see `Strings::escape`)
//!   (<https://github.com/apache/spark/blob/166f183474f8bcc14b9f9f2cfde1b533cd1282d4/sql/api/src/main/scala/org/apache/spark/sql/catalyst/util/SparkParserUtils.scala#L41-L160>).
//!
//! A doubled quote inside a string (`'it''s'`) means two things. Up to Spark 4.0 the lexer
//! ends the string at the second quote (`STRING_LITERAL` above), so it is two strings, `'it'`
//! and `'s'`, concatenated to `its`. Since SPARK-52545 (apache/spark#51242, Spark 4.1) it is
//! one string holding a quote, `it's` (`unescapeSQLString`, lines 109–120 above), and `its`
//! again with `spark.sql.legacy.consecutiveStringLiterals.enabled`. The table does not say
//! which Spark writes to it, so such a default reads as None. Spark's own `EXISTS_DEFAULT`
//! never has one: it writes `'it\'s'`.
//!
//! What depends on the session is read as no value: a timestamp without an offset is a
//! wall-clock time read in the session's time zone ([`SparkLiteral::wall_clock`], never an
//! instant), and the special dates and times (`DATE 'today'`) are read when the row is
//! written. Strings are read as by default: `spark.sql.parser.escapedStringLiterals` (Spark
//! 1.6's strings) is not followed.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime};

/// A Spark SQL literal: the value of a column default, before a target's type is applied.
#[derive(Debug, Clone, PartialEq)]
pub enum SparkLiteral {
    /// `NULL`: no default.
    Null,
    Boolean(bool),
    Number(SparkNumber),
    /// One string or several adjacent ones (`'it' 's'` is `its`), escapes read.
    String(String),
    /// `X'0A1b'`.
    Binary(Vec<u8>),
    /// `DATE '2024-01-02'`.
    Date(NaiveDate),
    /// `TIMESTAMP_NTZ '…'`: a wall-clock time.
    TimestampNtz(NaiveDateTime),
    /// `TIMESTAMP '…'` or `TIMESTAMP_LTZ '…'`: an instant when the text names an offset
    /// (`Z`, `UTC`, `+02:00`); without one, Spark reads the wall-clock time in its session's
    /// time zone.
    Timestamp {
        local: NaiveDateTime,
        offset: Option<FixedOffset>,
    },
}

/// A number literal: its text and the Spark type the lexer gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparkNumber {
    text: String,
    kind: NumberKind,
}

/// The Spark type of a number literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberKind {
    /// `1Y`.
    TinyInt,
    /// `2S`.
    SmallInt,
    /// `3`, when it fits an int.
    Int,
    /// `4L`, or a plain integer too large for an int.
    BigInt,
    /// `1.5`, `1.5BD`, `1e3BD`, or a plain integer too large for a bigint.
    Decimal,
    /// `1e3`, `1.5D`.
    Double,
    /// `1.5F`.
    Float,
}

/// The literal `text` (a field's `CURRENT_DEFAULT` or `EXISTS_DEFAULT`) stands for; None when
/// it is not a literal, or not one whose value this side of Spark can know.
pub fn parse(text: &str) -> Option<SparkLiteral> {
    let mut input = Input { rest: text };
    input.skip_space();
    let literal = input.literal()?;
    input.skip_space();
    input.rest.is_empty().then_some(literal)
}

impl SparkLiteral {
    /// The wall-clock time a `timestamp_ntz` column holds: a `TIMESTAMP_NTZ` literal, or a
    /// `TIMESTAMP` one without an offset (Spark reads it in its session's zone and casts it
    /// back to the same wall-clock time in that zone).
    pub fn wall_clock(&self) -> Option<NaiveDateTime> {
        match self {
            Self::TimestampNtz(at)
            | Self::Timestamp {
                local: at,
                offset: None,
            } => Some(*at),
            _ => None,
        }
    }

    /// The instant a `timestamp` column holds: a `TIMESTAMP` literal that names its offset.
    pub fn instant(&self) -> Option<DateTime<FixedOffset>> {
        match self {
            Self::Timestamp {
                local,
                offset: Some(offset),
            } => local.and_local_timezone(*offset).single(),
            _ => None,
        }
    }
}

impl SparkNumber {
    /// The number as written, without its type suffix: `-7`, `1.5`, `-2.5e-3`.
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn kind(&self) -> NumberKind {
        self.kind
    }

    /// The value in an integral column: integer literals only (`1.5` is no integer, though
    /// Spark would cut it to 1).
    pub fn integer(&self) -> Option<i64> {
        use NumberKind as K;
        match self.kind {
            K::TinyInt | K::SmallInt | K::Int | K::BigInt => self.text.parse().ok(),
            K::Decimal | K::Double | K::Float => None,
        }
    }

    /// The unscaled value in a decimal column of `scale`, rounded half up as Spark's cast
    /// rounds (`1.555` is 156 at scale 2): exact literals only, integers and decimals. The
    /// caller checks the precision.
    pub fn decimal(&self, scale: u32) -> Option<i128> {
        if matches!(self.kind, NumberKind::Double | NumberKind::Float) {
            return None;
        }
        let (negative, unsigned) = match self.text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, self.text.as_str()),
        };
        let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
            Some((m, e)) => (m, e.parse::<i64>().ok()?),
            None => (unsigned, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        // value = digits × 10^(exponent - fraction digits); unscaled = value × 10^scale.
        let shift = exponent - i64::try_from(fraction.len()).ok()? + i64::from(scale);
        let unscaled = unscaled_digits(digits, shift)?;
        Some(if negative { -unscaled } else { unscaled })
    }

    /// The value in a `double` column: a float literal widened (`0.1F` is
    /// 0.10000000149011612), any other read as a double.
    pub fn double(&self) -> Option<f64> {
        let value = match self.kind {
            NumberKind::Float => f64::from(self.text.parse::<f32>().ok()?),
            _ => self.text.parse::<f64>().ok()?,
        };
        value.is_finite().then_some(value)
    }

    /// The value in a `float` column: a double literal narrowed (Spark's cast of the
    /// double), any other read as a float.
    pub fn float(&self) -> Option<f32> {
        let value = match self.kind {
            NumberKind::Double => self.text.parse::<f64>().ok()? as f32,
            _ => self.text.parse::<f32>().ok()?,
        };
        value.is_finite().then_some(value)
    }
}

/// `digits` × 10^`shift`, rounded half up to an integer; None past 38 digits.
fn unscaled_digits(digits: &str, shift: i64) -> Option<i128> {
    if digits.is_empty() {
        return Some(0);
    }
    if shift >= 0 {
        let value: i128 = digits.parse().ok()?;
        return value.checked_mul(10i128.checked_pow(u32::try_from(shift).ok()?)?);
    }
    let cut = usize::try_from(shift.unsigned_abs()).ok()?;
    let Some(kept) = digits.len().checked_sub(cut) else {
        return Some(0);
    };
    let value: i128 = if kept == 0 {
        0
    } else {
        digits.get(..kept)?.parse().ok()?
    };
    let round_up = digits.as_bytes().get(kept).is_some_and(|d| *d >= b'5');
    value.checked_add(i128::from(round_up))
}

/// Spark's `WS` token: the characters between tokens.
fn is_space(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | '\u{c}' | '\r' | '\u{b}' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}' | '\u{2028}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// Letters, digits and `_`: what a keyword or identifier is made of.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The text still to read.
struct Input<'t> {
    rest: &'t str,
}

impl<'t> Input<'t> {
    fn peek(&self) -> Option<char> {
        self.rest.chars().next()
    }

    fn peek_second(&self) -> Option<char> {
        self.rest.chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.rest = &self.rest[c.len_utf8()..];
        Some(c)
    }

    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start_matches(is_space);
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &'t str {
        let end = self.rest.find(|c| !keep(c)).unwrap_or(self.rest.len());
        let (taken, rest) = self.rest.split_at(end);
        self.rest = rest;
        taken
    }

    /// Whether a string token starts here: a quote, or `R` and a quote.
    fn at_string(&self) -> bool {
        match self.peek() {
            Some('\'' | '"') => true,
            Some('r' | 'R') => matches!(self.peek_second(), Some('\'' | '"')),
            _ => false,
        }
    }

    fn literal(&mut self) -> Option<SparkLiteral> {
        if self.at_string() {
            return self.strings().map(SparkLiteral::String);
        }
        match self.peek()? {
            '-' | '+' | '.' | '0'..='9' => self.number().map(SparkLiteral::Number),
            _ => self.keyword(),
        }
    }

    /// `NULL`, `TRUE`, `FALSE`, or a typed literal: its keyword, then one string.
    fn keyword(&mut self) -> Option<SparkLiteral> {
        let word = self.take_while(is_word).to_ascii_uppercase();
        match word.as_str() {
            "NULL" => return Some(SparkLiteral::Null),
            "TRUE" => return Some(SparkLiteral::Boolean(true)),
            "FALSE" => return Some(SparkLiteral::Boolean(false)),
            _ => {}
        }
        self.skip_space();
        if !self.at_string() {
            return None;
        }
        let mut string = Strings::default();
        string.token(self)?;
        let value = string.value()?;
        match word.as_str() {
            "X" => binary(&value).map(SparkLiteral::Binary),
            "DATE" => date(&value).map(SparkLiteral::Date),
            "TIMESTAMP_NTZ" => match timestamp(&value)? {
                (at, None) => Some(SparkLiteral::TimestampNtz(at)),
                (_, Some(_)) => None,
            },
            "TIMESTAMP" | "TIMESTAMP_LTZ" => {
                let (local, offset) = timestamp(&value)?;
                Some(SparkLiteral::Timestamp { local, offset })
            }
            _ => None,
        }
    }

    /// `stringLit+`: adjacent strings, concatenated.
    fn strings(&mut self) -> Option<String> {
        let mut strings = Strings::default();
        loop {
            strings.token(self)?;
            let before = self.rest;
            self.skip_space();
            if !self.at_string() {
                self.rest = before;
                return strings.value();
            }
        }
    }

    /// `MINUS?` and a number token (a `+` too: Spark folds `+5` to 5).
    fn number(&mut self) -> Option<SparkNumber> {
        let negative = match self.peek()? {
            '-' => true,
            '+' => false,
            _ => return Token::read(self).number(false),
        };
        self.bump();
        self.skip_space();
        Token::read(self).number(negative)
    }
}

/// A number token's parts: `12`, `.`, `5`, `e-3`, `BD`.
struct Token<'t> {
    whole: &'t str,
    dot: bool,
    fraction: &'t str,
    exponent: Option<&'t str>,
    suffix: String,
}

impl<'t> Token<'t> {
    fn read(input: &mut Input<'t>) -> Self {
        let whole = input.take_while(|c| c.is_ascii_digit());
        let dot = input.peek() == Some('.');
        if dot {
            input.bump();
        }
        let fraction = input.take_while(|c| c.is_ascii_digit());
        let mut exponent = None;
        if matches!(input.peek(), Some('e' | 'E')) {
            let before = input.rest;
            input.bump();
            let sign = match input.peek() {
                Some('+' | '-') => input.bump().map_or(0, char::len_utf8),
                _ => 0,
            };
            let digits = input.take_while(|c| c.is_ascii_digit());
            if digits.is_empty() {
                input.rest = before;
            } else {
                exponent = before.get(1..1 + sign + digits.len());
            }
        }
        let suffix = input.take_while(is_word).to_ascii_uppercase();
        Token {
            whole,
            dot,
            fraction,
            exponent,
            suffix,
        }
    }

    /// The number this token is, with Spark's range checks; None when the lexer would make
    /// something else of it (`1e3L` is an identifier).
    fn number(self, negative: bool) -> Option<SparkNumber> {
        use NumberKind as K;
        if self.whole.is_empty() && self.fraction.is_empty() {
            return None;
        }
        let integral = !self.dot && self.exponent.is_none();
        let mut text = String::from(if negative { "-" } else { "" });
        text.push_str(self.whole);
        if self.dot {
            text.push('.');
            text.push_str(self.fraction);
        }
        if let Some(exponent) = self.exponent {
            text.push('e');
            text.push_str(exponent);
        }
        let fits = |min: f64, max: f64| {
            text.parse::<f64>()
                .is_ok_and(|v| v.is_finite() && (min..=max).contains(&v))
        };
        let kind = match (self.suffix.as_str(), integral) {
            ("Y", true) => text.parse::<i8>().ok().map(|_| K::TinyInt)?,
            ("S", true) => text.parse::<i16>().ok().map(|_| K::SmallInt)?,
            ("L", true) => text.parse::<i64>().ok().map(|_| K::BigInt)?,
            ("", true) if text.parse::<i32>().is_ok() => K::Int,
            ("", true) if text.parse::<i64>().is_ok() => K::BigInt,
            ("", true) | ("BD", _) => K::Decimal,
            ("", false) if self.exponent.is_none() => K::Decimal,
            ("", false) | ("D", _) => fits(f64::MIN, f64::MAX).then_some(K::Double)?,
            ("F", _) => fits(f64::from(f32::MIN), f64::from(f32::MAX)).then_some(K::Float)?,
            _ => return None,
        };
        Some(SparkNumber { text, kind })
    }
}

/// The string being read: UTF-16, as Java holds it, so that `\uD83D\uDC4D` is one character.
#[derive(Default)]
struct Strings {
    units: Vec<u16>,
}

impl Strings {
    /// Reads one string token into the value.
    fn token(&mut self, input: &mut Input<'_>) -> Option<()> {
        let raw = matches!(input.peek(), Some('r' | 'R'));
        if raw {
            input.bump();
        }
        let quote = input.bump()?;
        loop {
            match input.bump()? {
                c if c == quote => break,
                '\\' if !raw => {
                    let escaped = input.bump()?;
                    self.escape(escaped, input);
                }
                c => self.push(c),
            }
        }
        // A doubled quote: two strings up to Spark 4.0, one quote since (module doc).
        (input.peek() != Some(quote)).then_some(())
    }

    fn push(&mut self, c: char) {
        let mut buffer = [0; 2];
        self.units.extend_from_slice(c.encode_utf16(&mut buffer));
    }

    /// `\` and `escaped` (and what follows, for `\u`, `\U` and octal), as
    /// `unescapeSQLString` reads them: `\u0041` and `\U0001F44D` code points, `\101` octal
    /// (first digit 0 or 1), `\0` NUL, `\b` `\n` `\r` `\t` `\Z` control characters, `\%` and
    /// `\_` kept with their backslash (as MySQL does, for LIKE patterns), any other
    /// character itself (`\'`, `\\`, `\a` is `a`).
    fn escape(&mut self, escaped: char, input: &mut Input<'_>) {
        let hex = |input: &mut Input<'_>, digits: usize| {
            let text = input.rest.get(..digits)?;
            let value = text
                .bytes()
                .all(|b| b.is_ascii_hexdigit())
                .then(|| u32::from_str_radix(text, 16).ok())??;
            input.rest = &input.rest[digits..];
            Some(value)
        };
        let octal = |input: &mut Input<'_>| {
            let digits = input.rest.as_bytes().get(..2)?;
            digits.iter().all(|d| (b'0'..=b'7').contains(d)).then(|| {
                input.rest = &input.rest[2..];
                u32::from(digits[0] - b'0') * 8 + u32::from(digits[1] - b'0')
            })
        };
        match escaped {
            'u' => match hex(input, 4) {
                Some(unit) => self.units.push(unit as u16),
                None => self.push('u'),
            },
            'U' => match hex(input, 8) {
                Some(code) => self.code_point(code),
                None => self.push('U'),
            },
            '0' | '1' => match octal(input) {
                Some(low) => self.code_point((u32::from(escaped) - u32::from('0')) * 64 + low),
                None if escaped == '0' => self.push('\0'),
                None => self.push('1'),
            },
            'b' => self.push('\u{8}'),
            'n' => self.push('\n'),
            'r' => self.push('\r'),
            't' => self.push('\t'),
            'Z' => self.push('\u{1a}'),
            '%' | '_' => {
                self.push('\\');
                self.push(escaped);
            }
            other => self.push(other),
        }
    }

    /// A code point as Java appends it: one unit below 0x10000, else a surrogate pair.
    fn code_point(&mut self, code: u32) {
        if code < 0x1_0000 {
            self.units.push(code as u16);
        } else {
            let above = code.wrapping_sub(0x1_0000);
            self.units.push((0xd800 + (above / 0x400)) as u16);
            self.units.push((0xdc00 + (above % 0x400)) as u16);
        }
    }

    /// The value; None when it holds half a surrogate pair, which no target can store.
    fn value(&self) -> Option<String> {
        String::from_utf16(&self.units).ok()
    }
}

/// `X'…'`: hex digits, an odd count led by a `0` as Spark pads it.
fn binary(hex: &str) -> Option<Vec<u8>> {
    let padded = if !hex.len().is_multiple_of(2) {
        format!("0{hex}")
    } else {
        hex.to_string()
    };
    (0..padded.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(padded.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Spark's `stringToDate`: `yyyy`, `yyyy-[m]m`, `yyyy-[m]m-[d]d`, the last followed by
/// anything after a space or `T`; the year of 4 to 7 digits, optionally signed. Special
/// values (`today`, `epoch`) are not dates here.
fn date(text: &str) -> Option<NaiveDate> {
    let text = text.trim_matches(is_space);
    let day_end = text.find([' ', 'T']).unwrap_or(text.len());
    let (day, _) = text.split_at(day_end);
    let (sign, unsigned) = match day.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, day.strip_prefix('+').unwrap_or(day)),
    };
    let parts: Vec<&str> = unsigned.split('-').collect();
    if parts.len() < 3 && day_end != text.len() {
        return None;
    }
    let number = |part: &str, digits: std::ops::RangeInclusive<usize>| {
        (digits.contains(&part.len()) && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<i32>().ok())?
    };
    let year = number(parts.first()?, 4..=7)?;
    let month = parts.get(1).map_or(Some(1), |m| number(m, 1..=2))?;
    let day = parts.get(2).map_or(Some(1), |d| number(d, 1..=2))?;
    if parts.len() > 3 {
        return None;
    }
    NaiveDate::from_ymd_opt(sign * year, month.try_into().ok()?, day.try_into().ok()?)
}

/// A timestamp's text: a date (`yyyy-[m]m-[d]d`), then optionally ` ` or `T` and
/// `[h]h:[m]m[:[s]s[.fraction]]`, then optionally an offset (`Z`, `UTC`, `+hh:mm`). The
/// fraction is cut to microseconds, as Spark keeps it. A subset of Spark's
/// `stringToTimestamp`: a region (`Europe/Paris`) is not read.
fn timestamp(text: &str) -> Option<(NaiveDateTime, Option<FixedOffset>)> {
    let text = text.trim_matches(is_space);
    let split = text.find([' ', 'T']).unwrap_or(text.len());
    let (day, rest) = text.split_at(split);
    let rest = rest.get(1..).unwrap_or("");
    // A time follows a whole date only.
    if !rest.is_empty() && day.trim_start_matches(['-', '+']).matches('-').count() != 2 {
        return None;
    }
    let day = date(day)?;
    let time_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == ':' || c == '.'))
        .unwrap_or(rest.len());
    let (time, zone) = rest.split_at(time_end);
    let time = if time.is_empty() {
        NaiveTime::MIN
    } else {
        clock(time)?
    };
    let zone = zone.trim_matches(is_space);
    let offset = match zone {
        "" => None,
        "Z" | "UTC" => Some(FixedOffset::east_opt(0)?),
        _ => Some(offset(zone)?),
    };
    Some((day.and_time(time), offset))
}

/// `[h]h:[m]m[:[s]s[.fraction]]`.
fn clock(text: &str) -> Option<NaiveTime> {
    let (hms, fraction) = text.split_once('.').unwrap_or((text, ""));
    let parts: Vec<&str> = hms.split(':').collect();
    let part = |i: usize| -> Option<u32> {
        parts.get(i).map_or(Some(0), |p| {
            (matches!(p.len(), 1 | 2) && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse().ok())?
        })
    };
    if !(2..=3).contains(&parts.len())
        || (!fraction.is_empty() && parts.len() < 3)
        || fraction.len() > 9
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let micros: u32 = format!("{fraction:0<6}").get(..6)?.parse().ok()?;
    NaiveTime::from_hms_micro_opt(part(0)?, part(1)?, part(2)?, micros)
}

/// `+hh:mm` or `-hh:mm`.
fn offset(text: &str) -> Option<FixedOffset> {
    let sign = match text.get(..1)? {
        "+" => 1,
        "-" => -1,
        _ => return None,
    };
    let (hours, minutes) = text.get(1..)?.split_once(':')?;
    let number = |part: &str| {
        (part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse::<i32>().ok())?
    };
    FixedOffset::east_opt(sign * (number(hours)? * 3600 + number(minutes)? * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> Option<String> {
        match parse(text)? {
            SparkLiteral::String(s) => Some(s),
            other => panic!("{text}: {other:?}"),
        }
    }

    fn number(text: &str) -> Option<(String, NumberKind)> {
        match parse(text)? {
            SparkLiteral::Number(n) => Some((n.text().to_string(), n.kind())),
            other => panic!("{text}: {other:?}"),
        }
    }

    fn n(text: &str) -> SparkNumber {
        match parse(text) {
            Some(SparkLiteral::Number(n)) => n,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn strings_read_escapes_as_unescape_sql_string_does() {
        let cases = [
            ("'abc'", "abc"),
            (r#""a\"b""#, "a\"b"),
            (r"'it\'s'", "it's"),
            (r"'a\\b'", r"a\b"),
            (r"'\u0041'", "A"),
            (r"'\u00e9'", "é"),
            (r"'\U0001F44D'", "👍"),
            (r"'\uD83D\uDC4D'", "👍"),
            (r"'\101\060'", "A0"),
            (r"'\0'", "\0"),
            (r"'a\0b'", "a\0b"),
            (r"'\08'", "\08"),
            (r"'\1x'", "1x"),
            (r"'\200'", "200"),
            (r"'\b\n\r\t\Z'", "\u{8}\n\r\t\u{1a}"),
            (r"'\%\_'", r"\%\_"),
            (r"'\a\q'", "aq"),
            (r"'\u00zz'", "u00zz"),
            (r"'\U0041'", "U0041"),
            ("''", ""),
            ("'it' 's'", "its"),
            ("'a'\"b\"", "ab"),
            ("'a'\n  'b' 'c'", "abc"),
            (r"R'a\nb'", r"a\nb"),
            (r#"r"C:\dir\""#, r"C:\dir\"),
            (r"'x' r'\n'", r"x\n"),
            ("  'padded'  ", "padded"),
        ];
        for (text, value) in cases {
            assert_eq!(string(text).as_deref(), Some(value), "{text}");
        }
    }

    #[test]
    fn a_doubled_quote_has_no_one_meaning_across_spark_versions() {
        for text in ["'it''s'", "\"a\"\"b\"", "''''", "'a'''", "R'a''b'"] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn anything_but_a_constant_is_none() {
        for text in [
            "",
            "current_date()",
            "1 + 1",
            "'a' || 'b'",
            "CAST('1.5' AS FLOAT)",
            "'unclosed",
            "'a' b",
            "'a' -- comment",
            "NaN",
            "1e3L",
            "1.5x",
            "1e",
            ".",
            "-",
            "--5",
            "1 2",
            "128Y",
            "40000S",
            "9223372036854775808L",
            "1e400",
            "1e39F",
            "1.5BDX",
            "INTERVAL '1' DAY",
            "INTEGER '5'",
            "X'0G'",
            r"'\uD83D'",
            "nullx",
            "R",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }

    #[test]
    fn numbers_take_the_spark_type_of_their_token() {
        use NumberKind as K;
        let cases = [
            ("1Y", "1", K::TinyInt),
            ("-128y", "-128", K::TinyInt),
            ("2S", "2", K::SmallInt),
            ("3", "3", K::Int),
            ("-2147483648", "-2147483648", K::Int),
            ("2147483648", "2147483648", K::BigInt),
            ("4L", "4", K::BigInt),
            ("+4l", "4", K::BigInt),
            ("- 7", "-7", K::Int),
            ("9223372036854775808", "9223372036854775808", K::Decimal),
            ("1.5", "1.5", K::Decimal),
            (".5", ".5", K::Decimal),
            ("2.", "2.", K::Decimal),
            ("1.5BD", "1.5", K::Decimal),
            ("-.1234567E+2BD", "-.1234567e+2", K::Decimal),
            ("1e3", "1e3", K::Double),
            ("1e3D", "1e3", K::Double),
            ("-2.5e-3D", "-2.5e-3", K::Double),
            ("1.0E10D", "1.0e10", K::Double),
            ("-0.0F", "-0.0", K::Float),
            ("1.5f", "1.5", K::Float),
        ];
        for (text, digits, kind) in cases {
            assert_eq!(number(text), Some((digits.to_string(), kind)), "{text}");
        }
    }

    #[test]
    fn numbers_give_the_value_each_column_type_holds() {
        assert_eq!(n("16").integer(), Some(16));
        assert_eq!(n("-7L").integer(), Some(-7));
        assert_eq!(n("1.5").integer(), None);
        assert_eq!(n("1e3").integer(), None);

        assert_eq!(n("12.50BD").decimal(2), Some(1250));
        assert_eq!(n("1.555").decimal(2), Some(156));
        assert_eq!(n("-1.555").decimal(2), Some(-156));
        assert_eq!(n("1.554").decimal(2), Some(155));
        assert_eq!(n("0.004").decimal(2), Some(0));
        assert_eq!(n("0.005").decimal(2), Some(1));
        assert_eq!(n("5L").decimal(2), Some(500));
        assert_eq!(n("1e3BD").decimal(2), Some(100_000));
        assert_eq!(n("1E-3BD").decimal(2), Some(0));
        assert_eq!(n("-.1234567E+2BD").decimal(3), Some(-12_346));
        assert_eq!(n("0.000").decimal(0), Some(0));
        assert_eq!(n("1e3").decimal(2), None, "a double is no exact number");
        assert_eq!(n("1e40BD").decimal(0), None, "past 38 digits");

        assert_eq!(n("0.1F").double(), Some(f64::from(0.1f32)));
        assert_eq!(n("0.1").double(), Some(0.1));
        assert_eq!(n("1.5D").float(), Some(1.5));
        assert_eq!(n("16").float(), Some(16.0));
        assert_eq!(n("1e39").float(), None);
        assert!(
            n("-0.0F")
                .float()
                .is_some_and(|f| f == 0.0 && f.is_sign_negative())
        );
    }

    #[test]
    fn typed_literals_read_their_one_string() {
        let date = |y, m, d| NaiveDate::from_ymd_opt(y, m, d);
        let at = |text: &str| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").ok();
        assert_eq!(
            parse("DATE '2024-01-02'"),
            date(2024, 1, 2).map(SparkLiteral::Date)
        );
        assert_eq!(
            parse("date'2024-1-2'"),
            date(2024, 1, 2).map(SparkLiteral::Date)
        );
        assert_eq!(
            parse("DATE '1997'"),
            date(1997, 1, 1).map(SparkLiteral::Date)
        );
        assert_eq!(
            parse("DATE '2024-01-02T10:00'"),
            date(2024, 1, 2).map(SparkLiteral::Date)
        );
        for bad in [
            "DATE '2020-13-01'",
            "DATE '2020-02-30'",
            "DATE 'today'",
            "DATE '20-01-01'",
            "DATE '2020-01 x'",
            "DATE '2020' '-01-01'",
            "DATE",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }

        assert_eq!(
            parse("TIMESTAMP_NTZ '2020-01-01 10:00:00.5'"),
            at("2020-01-01 10:00:00.5").map(SparkLiteral::TimestampNtz)
        );
        assert_eq!(
            parse("TIMESTAMP_NTZ '2020-01-01T10:00:00.123456789'").and_then(|l| l.wall_clock()),
            at("2020-01-01 10:00:00.123456"),
            "cut to microseconds"
        );
        assert_eq!(
            parse("TIMESTAMP '2020-01-01'").and_then(|l| l.wall_clock()),
            at("2020-01-01 00:00:00")
        );
        let instant = |text: &str| {
            parse(text)
                .and_then(|l| l.instant())
                .map(|i| i.to_rfc3339())
        };
        assert_eq!(
            instant("TIMESTAMP '2020-01-01 10:00:00+02:00'").as_deref(),
            Some("2020-01-01T10:00:00+02:00")
        );
        assert_eq!(
            instant("timestamp_ltz '2020-01-01 10:00Z'").as_deref(),
            Some("2020-01-01T10:00:00+00:00")
        );
        assert_eq!(
            instant("TIMESTAMP '2020-01-01 10:00:00 UTC'").as_deref(),
            Some("2020-01-01T10:00:00+00:00")
        );
        assert_eq!(instant("TIMESTAMP '2020-01-01 10:00:00'"), None);
        assert_eq!(
            parse("TIMESTAMP '2020-01-01 10:00:00+02:00'").and_then(|l| l.wall_clock()),
            None
        );
        for bad in [
            "TIMESTAMP_NTZ '2020-01-01 10:00:00+02:00'",
            "TIMESTAMP '2020-01-01 10:00:00 Europe/Paris'",
            "TIMESTAMP '2020-01-01 25:00:00'",
            "TIMESTAMP '2020-01-01 10'",
            "TIMESTAMP '2020-01-01 10:00.5'",
            "TIMESTAMP '2020 10:00:00'",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }

        assert_eq!(
            parse("X'0A1b'"),
            Some(SparkLiteral::Binary(vec![0x0a, 0x1b]))
        );
        assert_eq!(
            parse("x \"0a0\""),
            Some(SparkLiteral::Binary(vec![0x00, 0xa0]))
        );
        assert_eq!(parse("X''"), Some(SparkLiteral::Binary(vec![])));
    }

    #[test]
    fn keywords_are_read_in_any_case() {
        assert_eq!(parse("NULL"), Some(SparkLiteral::Null));
        assert_eq!(parse(" null "), Some(SparkLiteral::Null));
        assert_eq!(parse("True"), Some(SparkLiteral::Boolean(true)));
        assert_eq!(parse("FALSE"), Some(SparkLiteral::Boolean(false)));
    }
}
