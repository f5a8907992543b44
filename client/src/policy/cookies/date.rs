//! The cookie-date of an `Expires` attribute, read as RFC 6265 §5.1.1 has
//! user agents read it — leniently, as the browsers do: the date's parts
//! are found among its tokens wherever they stand, and whatever else there
//! is (a weekday, a zone: `GMT`, `UTC`, `+0000`, none) is ignored. The
//! `cookie` crate reads only four exact layouts and makes a cookie with any
//! other date a session cookie, so a server deleting a cookie with a past
//! date written otherwise would leave it in the jar.

/// A date and time of day, in UTC, as a cookie-date gives them: every
/// field in range and the day one the month has (§5.1.1 steps 5 and 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CookieDate {
    /// 1601 to 9999.
    pub(super) year: u16,
    /// 1 to 12.
    pub(super) month: u8,
    /// 1 to the month's last day.
    pub(super) day: u8,
    /// 0 to 23.
    pub(super) hour: u8,
    /// 0 to 59.
    pub(super) minute: u8,
    /// 0 to 59 (the syntax has no leap second).
    pub(super) second: u8,
}

/// The months' names, as a cookie-date's month token starts (in any case).
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

impl CookieDate {
    /// Reads `text` by RFC 6265 §5.1.1; `None` where the algorithm fails
    /// to parse it (a part missing or out of range, a day the month does
    /// not have).
    pub(super) fn parse(text: &str) -> Option<CookieDate> {
        let mut time = None;
        let mut day = None;
        let mut month = None;
        let mut year = None;
        // Step 2: each token is tried for the parts not yet found, in this
        // order, and gives at most one of them.
        for token in text.as_bytes().split(|&b| is_delimiter(b)) {
            if token.is_empty() {
                continue;
            }
            if time.is_none() {
                if let Some(hms) = hms_time(token) {
                    time = Some(hms);
                    continue;
                }
            }
            if day.is_none() {
                if let Some(value) = leading_digits(token, 1, 2) {
                    day = Some(value);
                    continue;
                }
            }
            if month.is_none() {
                if let Some(value) = month_of(token) {
                    month = Some(value);
                    continue;
                }
            }
            if year.is_none() {
                if let Some(value) = leading_digits(token, 2, 4) {
                    year = Some(value);
                }
            }
        }
        let ((hour, minute, second), day, month, year) = (time?, day?, month?, year?);
        // Steps 3 and 4: a two-digit year is 1970 to 2069.
        let year = match year {
            70..=99 => year + 1900,
            0..=69 => year + 2000,
            _ => year,
        };
        // Step 5, and step 6: the date must exist.
        if !(1601..=9999).contains(&year) || hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        let year = u16::try_from(year).ok()?;
        let month = u8::try_from(month).ok()?;
        let day = u8::try_from(day).ok()?;
        if day < 1 || day > days_in_month(year, month) {
            return None;
        }
        Some(CookieDate {
            year,
            month,
            day,
            hour: u8::try_from(hour).ok()?,
            minute: u8::try_from(minute).ok()?,
            second: u8::try_from(second).ok()?,
        })
    }

    /// The instant the date names, UTC: the `cookie` crate's expiry, as it
    /// reads one from an `Expires` value. `None` never for a date
    /// [`CookieDate::parse`] gave: its fields are in range.
    pub(super) fn to_expiry(self) -> Option<time::OffsetDateTime> {
        let month = time::Month::try_from(self.month).ok()?;
        let date = time::Date::from_calendar_date(i32::from(self.year), month, self.day).ok()?;
        let time_of_day = time::Time::from_hms(self.hour, self.minute, self.second).ok()?;
        Some(time::PrimitiveDateTime::new(date, time_of_day).assume_utc())
    }

    /// The date as the `cookie` crate reads an `Expires` value
    /// (`01 Jan 1970 00:00:00 GMT`: its first layout, without the weekday,
    /// which it does not check anyway): what the tests check
    /// [`CookieDate::to_expiry`] against.
    #[cfg(test)]
    pub(super) fn to_expires_value(self) -> String {
        format!(
            "{:02} {} {:04} {:02}:{:02}:{:02} GMT",
            self.day,
            MONTHS[usize::from(self.month - 1)],
            self.year,
            self.hour,
            self.minute,
            self.second
        )
    }
}

/// §5.1.1's `delimiter`: what separates a cookie-date's tokens.
fn is_delimiter(b: u8) -> bool {
    matches!(b, 0x09 | 0x20..=0x2F | 0x3B..=0x40 | 0x5B..=0x60 | 0x7B..=0x7E)
}

/// The value of the `min` to `max` digits `token` starts with, if what
/// follows them is not a digit (§5.1.1's `day-of-month` and `year`:
/// `1*2DIGIT ( non-digit *OCTET )`, `2*4DIGIT ( non-digit *OCTET )`).
fn leading_digits(token: &[u8], min: usize, max: usize) -> Option<u32> {
    let digits = token.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits < min || digits > max {
        return None;
    }
    Some(
        token[..digits]
            .iter()
            .fold(0, |value, &d| value * 10 + u32::from(d - b'0')),
    )
}

/// §5.1.1's `time`: `hms-time ( non-digit *OCTET )`, each of the three
/// fields one or two digits.
fn hms_time(token: &[u8]) -> Option<(u32, u32, u32)> {
    let mut rest = token;
    let mut fields = [0; 3];
    for (i, field) in fields.iter_mut().enumerate() {
        *field = leading_digits(rest, 1, 2)?;
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        rest = &rest[digits..];
        if i < 2 {
            rest = rest.strip_prefix(b":")?;
        }
    }
    Some((fields[0], fields[1], fields[2]))
}

/// §5.1.1's `month`: a token whose first three characters name one, in any
/// case; 1 to 12.
fn month_of(token: &[u8]) -> Option<u32> {
    let start = token.get(..3)?;
    let index = MONTHS
        .iter()
        .position(|name| name.as_bytes().eq_ignore_ascii_case(start))?;
    u32::try_from(index + 1).ok()
}

/// The last day of `month` (1 to 12) of the Gregorian `year`.
fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn date(year: u16, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> CookieDate {
        CookieDate {
            year,
            month,
            day,
            hour,
            minute,
            second,
        }
    }

    /// The layouts servers send, standard or not: the weekday and the zone
    /// (whatever it says) ignored, the parts found in any order.
    #[test]
    fn the_layouts_servers_send_are_read() {
        let epoch = date(1970, 1, 1, 0, 0, 0);
        for text in [
            "Thu, 01 Jan 1970 00:00:00 GMT",
            "Thu, 01 Jan 1970 00:00:00 UTC",
            "Thu, 1 Jan 1970 00:00:00 GMT",
            "Thu, 01 Jan 1970 00:00:00 +0000",
            "Thu, 01 Jan 1970 00:00:00",
            "Thu, 01 Jan 70 00:00:00 GMT",
            "Thu, 01-Jan-70 00:00:00 GMT",
            "Thursday, 01-Jan-1970 00:00:00 GMT",
            "Thu Jan  1 00:00:00 1970",
            "1970-Jan-01 0:0:0",
            "january 1st 1970 00:00:00",
            "  THU,01 JAN 1970 00:00:00 gmt  ",
        ] {
            assert_eq!(CookieDate::parse(text), Some(epoch), "{text:?}");
        }
        assert_eq!(
            CookieDate::parse("Wed, 09 Jun 2021 10:18:14 GMT"),
            Some(date(2021, 6, 9, 10, 18, 14))
        );
    }

    /// Steps 3 and 4: two digits are 1970 to 2069.
    #[test]
    fn a_two_digit_year_is_1970_to_2069() {
        for (text, year) in [
            ("01 Jan 70 00:00:00", 1970),
            ("01 Jan 99 00:00:00", 1999),
            ("01 Jan 00 00:00:00", 2000),
            ("01 Jan 69 00:00:00", 2069),
            ("01 Jan 1969 00:00:00", 1969),
            ("01 Jan 2070 00:00:00", 2070),
        ] {
            assert_eq!(
                CookieDate::parse(text).map(|d| d.year),
                Some(year),
                "{text:?}"
            );
        }
    }

    /// Steps 5 and 6: a part missing, out of range, or a day the month does
    /// not have, and there is no date.
    #[test]
    fn a_date_with_a_part_missing_or_out_of_range_is_none() {
        for text in [
            "",
            "Thu, 01 Jan 1970",
            "Thu, 01 1970 00:00:00 GMT",
            "Thu, Jan 1970 00:00:00 GMT",
            "Thu, 01 Jan 00:00:00 GMT",
            "Thu, 00 Jan 1970 00:00:00 GMT",
            "Thu, 32 Jan 1970 00:00:00 GMT",
            "Thu, 01 Jan 1970 24:00:00 GMT",
            "Thu, 01 Jan 1970 00:60:00 GMT",
            "Thu, 01 Jan 1970 00:00:60 GMT",
            "Thu, 01 Jan 1600 00:00:00 GMT",
            "Thu, 01 Jan 19700 00:00:00 GMT",
            "Thu, 001 Jan 1970 00:00:00 GMT",
            "Thu, 01 Jan 1970 000:00:00 GMT",
            "Thu, 01 Jan 1970 00:00 GMT",
            "Tue, 31 Apr 2024 00:00:00 GMT",
            "Sat, 29 Feb 2025 00:00:00 GMT",
            "Thu, 29 Feb 1900 00:00:00 GMT",
            "Thu, 01 Ja 1970 00:00:00 GMT",
            "tomorrow",
        ] {
            assert_eq!(CookieDate::parse(text), None, "{text:?}");
        }
        assert!(CookieDate::parse("Thu, 29 Feb 2024 00:00:00 GMT").is_some());
        assert!(CookieDate::parse("Tue, 29 Feb 2000 00:00:00 GMT").is_some());
    }

    #[test]
    fn the_date_is_written_as_the_cookie_crate_reads_it() {
        assert_eq!(
            date(1970, 1, 1, 0, 0, 0).to_expires_value(),
            "01 Jan 1970 00:00:00 GMT"
        );
        assert_eq!(
            date(1601, 12, 31, 23, 59, 59).to_expires_value(),
            "31 Dec 1601 23:59:59 GMT"
        );
    }

    /// The expiry made from a date's fields is the instant the `cookie`
    /// crate reads from the date written out (as the jar had it read
    /// before): the ends of the range, a leap day, the epoch, a date with
    /// every field of one digit.
    #[test]
    fn the_expiry_is_the_instant_the_cookie_crate_reads() {
        for date in [
            date(1601, 1, 1, 0, 0, 0),
            date(1970, 1, 1, 0, 0, 0),
            date(2000, 2, 29, 12, 30, 45),
            date(2021, 6, 9, 10, 18, 14),
            date(2024, 9, 5, 7, 8, 9),
            date(9999, 12, 31, 23, 59, 59),
        ] {
            let read =
                cookie_store::RawCookie::parse(format!("e=; Expires={}", date.to_expires_value()))
                    .unwrap()
                    .expires_datetime();
            assert_eq!(date.to_expiry(), read, "{date:?}");
            assert!(read.is_some(), "{date:?}");
        }
        assert_eq!(
            date(2021, 6, 9, 10, 18, 14)
                .to_expiry()
                .map(|at| at.unix_timestamp()),
            Some(1_623_233_894)
        );
    }
}
