//! The README's API table is the list a user reads: it must say exactly what ApiVersions
//! advertises.

use super::*;

const README: &str = include_str!("../../../../../README.md");

#[test]
fn the_readme_api_table_lists_every_advertised_api_and_version_range() {
    // Rows like `| Fetch | 1 | 4-12 | ... |`, under "The Kafka APIs it speaks".
    let section = README
        .split("## The Kafka APIs it speaks")
        .nth(1)
        .expect("the README has its API section");
    let mut listed: Vec<(i16, i16, i16)> = section
        .lines()
        .take_while(|line| !line.starts_with("## "))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let key = cells.get(2)?.parse::<i16>().ok()?;
            let (min, max) = cells.get(3)?.split_once('-')?;
            Some((key, min.parse().ok()?, max.parse().ok()?))
        })
        .collect();
    let mut advertised: Vec<(i16, i16, i16)> = SUPPORTED_APIS
        .iter()
        .map(|(api, min, max)| (*api as i16, *min, *max))
        .collect();
    listed.sort_unstable();
    advertised.sort_unstable();
    assert_eq!(
        listed, advertised,
        "README rows (key, min, max) vs SUPPORTED_APIS"
    );
}
