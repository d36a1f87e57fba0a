//! Line charts in the style of the Azure NetApp Files / Azure Files performance pages: the
//! swept variable on x (as categories: 4k, 8k, ... or 100:0, 75:25, ...), IOPS or MiB/s on
//! y, one line per target. Written as PNG and SVG. Also a run's per-second IOPS and MiB/s
//! (`--timeline`), as in the Azure Files bursting charts.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

use crate::timeline::Point;
use crate::BenchError;

/// One line of a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text (the target).
    pub name: String,
    /// y per x category (None where that point is missing).
    pub values: Vec<Option<f64>>,
}

/// A chart: title, axis names, x categories and lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Caption.
    pub title: String,
    /// Name of the x axis.
    pub x_label: String,
    /// Name of the y axis.
    pub y_label: String,
    /// x categories, left to right.
    pub categories: Vec<String>,
    /// Lines.
    pub series: Vec<Series>,
}

/// Places to look for a TrueType font for the PNG text (SVG text is drawn by the viewer,
/// but plotters lays it out with the same font). `BRAID_BENCH_FONT` overrides.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/Library/Fonts/Arial.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

/// Registers a system font once; false when none was found (charts are then drawn
/// without text rather than not at all).
fn have_font() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        let env = std::env::var("BRAID_BENCH_FONT").ok();
        for p in env.iter().map(String::as_str).chain(FONT_PATHS.iter().copied()) {
            if let Ok(bytes) = std::fs::read(p) {
                // Registered fonts live for the whole process; leaking one file is the price.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, bytes);
                    return true;
                }
            }
        }
        false
    })
}

/// Line colours, distinguishable and print-friendly.
const COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 198),
    RGBColor(230, 97, 1),
    RGBColor(0, 158, 115),
    RGBColor(204, 51, 153),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(100, 100, 100),
    RGBColor(240, 200, 0),
];

const SIZE: (u32, u32) = (900, 560);

fn chart_err(e: impl std::fmt::Display) -> BenchError {
    BenchError::Io(format!("drawing chart: {e}"))
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, c: &Chart, text: bool) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(chart_err)?;
    let n = c.categories.len().max(1);
    let ymax = c.series.iter().flat_map(|s| s.values.iter().flatten()).fold(0.0f64, |a, &b| a.max(b));
    let ymax = if ymax > 0.0 { ymax * 1.1 } else { 1.0 };
    let xr = -0.5f64..(n as f64 - 0.5);
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if text {
        builder.caption(&c.title, ("sans-serif", 22)).x_label_area_size(50).y_label_area_size(80);
    }
    let mut chart = builder.build_cartesian_2d(xr, 0.0..ymax).map_err(chart_err)?;
    if text {
        let cats = c.categories.clone();
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x: &f64| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    cats.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .disable_x_mesh()
            .x_desc(&c.x_label)
            .y_desc(&c.y_label)
            .label_style(("sans-serif", 15))
            .draw()
            .map_err(chart_err)?;
    }
    for (i, s) in c.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s.values.iter().enumerate().filter_map(|(x, v)| v.map(|v| (x as f64, v))).collect();
        let line = chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(3))).map_err(chart_err)?;
        if text {
            line.label(s.name.clone()).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
        }
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(chart_err)?;
    }
    if text && !c.series.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(chart_err)?;
    }
    root.present().map_err(chart_err)
}

/// Writes `<base>.png` and `<base>.svg`; returns both paths.
pub fn write_chart(base: &Path, c: &Chart) -> Result<Vec<PathBuf>, BenchError> {
    let text = have_font();
    let svg_path = base.with_extension("svg");
    let png_path = base.with_extension("png");
    let mut svg = String::new();
    draw(SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(), c, text)?;
    let mut rgb = vec![0u8; (SIZE.0 * SIZE.1 * 3) as usize];
    draw(BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area(), c, text)?;
    std::fs::write(&svg_path, svg).map_err(|e| io_err(&svg_path, e))?;
    write_png(&png_path, &rgb, SIZE)?;
    Ok(vec![png_path, svg_path])
}

fn io_err(p: &Path, e: std::io::Error) -> BenchError {
    BenchError::Io(format!("{}: {e}", p.display()))
}

/// Encodes an RGB buffer of `size` as a PNG file.
fn write_png(path: &Path, rgb: &[u8], size: (u32, u32)) -> Result<(), BenchError> {
    let file = std::fs::File::create(path).map_err(|e| io_err(path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), size.0, size.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(chart_err)?;
    w.write_image_data(rgb).map_err(chart_err)?;
    w.finish().map_err(chart_err)
}

const TIMELINE_SIZE: (u32, u32) = (1000, 720);

/// Draws a run's per-second series (`--timeline`) into `path`: IOPS above, MiB/s below,
/// against seconds of the run, as in the Azure Files bursting charts. A path ending in .svg
/// gets SVG, anything else PNG. Read and write get lines of their own when the run did both.
/// `iops_marks` are IOPS levels drawn as dashed reference lines (a baseline, a burst limit).
pub fn write_timeline(path: &Path, title: &Title, points: &[Point], iops_marks: &[f64]) -> Result<(), BenchError> {
    let text = have_font();
    let is_svg = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    if is_svg {
        let mut svg = String::new();
        draw_timeline(SVGBackend::with_string(&mut svg, TIMELINE_SIZE).into_drawing_area(), title, (points, iops_marks), text)?;
        return std::fs::write(path, svg).map_err(|e| io_err(path, e));
    }
    let mut rgb = vec![0u8; (TIMELINE_SIZE.0 * TIMELINE_SIZE.1 * 3) as usize];
    draw_timeline(BitMapBackend::with_buffer(&mut rgb, TIMELINE_SIZE).into_drawing_area(), title, (points, iops_marks), text)?;
    write_png(path, &rgb, TIMELINE_SIZE)
}

/// A timeline chart's heading: the target, and the workload in smaller type beneath.
#[derive(Debug, Clone, Default)]
pub struct Title {
    /// The first line (the target).
    pub main: String,
    /// The second line (the workload).
    pub sub: String,
}

/// One panel's lines: legend text and a value per second.
type Lines<'a> = Vec<(&'static str, RGBColor, Box<dyn Fn(&Point) -> f64 + 'a>)>;

fn draw_timeline<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &Title,
    (points, marks): (&[Point], &[f64]),
    text: bool,
) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(chart_err)?;
    let root = if text {
        let root = root.titled(&title.main, ("sans-serif", 20)).map_err(chart_err)?;
        root.titled(&title.sub, ("sans-serif", 15)).map_err(chart_err)?
    } else {
        root
    };
    let panels = root.split_evenly((2, 1));
    let mixed = points.iter().any(|p| p.read_iops > 0.0) && points.iter().any(|p| p.write_iops > 0.0);
    let mut iops: Lines = vec![("total", COLORS[0], Box::new(|p: &Point| p.iops))];
    let mut mib: Lines = vec![("total", COLORS[0], Box::new(|p: &Point| p.mib_per_s))];
    if mixed {
        iops.push(("read", COLORS[2], Box::new(|p: &Point| p.read_iops)));
        iops.push(("write", COLORS[1], Box::new(|p: &Point| p.write_iops)));
        mib.push(("read", COLORS[2], Box::new(|p: &Point| p.read_mib_per_s)));
        mib.push(("write", COLORS[1], Box::new(|p: &Point| p.write_mib_per_s)));
    }
    draw_panel(&panels[0], (points, marks), "IOPS", &iops, text)?;
    draw_panel(&panels[1], (points, &[]), "MiB/s", &mib, text)?;
    root.present().map_err(chart_err)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (points, marks): (&[Point], &[f64]),
    y_label: &str,
    lines: &Lines,
    text: bool,
) -> Result<(), BenchError>
where
    DB::ErrorType: 'static,
{
    // Seconds need not start at 0 (`braid bench chart` draws any CSV).
    let xmin = points.iter().map(|p| f64::from(p.second)).fold(f64::INFINITY, f64::min);
    let xmin = if xmin.is_finite() { xmin } else { 0.0 };
    let xmax = points.iter().map(|p| f64::from(p.second)).fold(xmin + 1.0, f64::max);
    let ymax = lines.iter().flat_map(|(_, _, f)| points.iter().map(f)).chain(marks.iter().copied()).fold(0.0f64, f64::max);
    // Headroom above the highest line for the legend.
    let ymax = if ymax > 0.0 { ymax * 1.35 } else { 1.0 };
    let mut builder = ChartBuilder::on(area);
    builder.margin(15);
    if text {
        builder.x_label_area_size(40).y_label_area_size(80);
    }
    let mut chart = builder.build_cartesian_2d(xmin..xmax, 0.0..ymax).map_err(chart_err)?;
    if text {
        // Whole seconds only, however few there are; whole numbers unless the values are small.
        let y_fmt = |y: &f64| if ymax >= 10.0 { format!("{y:.0}") } else { format!("{y:.1}") };
        chart
            .configure_mesh()
            .x_labels(((xmax - xmin) as usize + 1).clamp(2, 13))
            .x_label_formatter(&|x: &f64| if (x - x.round()).abs() < 1e-6 { format!("{x:.0}") } else { String::new() })
            .y_label_formatter(&y_fmt)
            .light_line_style(WHITE)
            .x_desc("seconds")
            .y_desc(y_label)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(chart_err)?;
    }
    let grey = RGBColor(120, 120, 120);
    for &m in marks.iter().filter(|m| m.is_finite()) {
        let style = grey.stroke_width(1);
        chart.draw_series(DashedLineSeries::new(vec![(xmin, m), (xmax, m)], 8, 6, style)).map_err(chart_err)?;
        if text {
            // Above the line at its right end, clear of the axis and of lines that start high.
            let font = ("sans-serif", 13).into_font().color(&grey).pos(Pos::new(HPos::Right, VPos::Bottom));
            chart.draw_series(std::iter::once(Text::new(format!("{m}"), (xmax, m), font))).map_err(chart_err)?;
        }
    }
    for (name, color, f) in lines {
        let color = *color;
        let pts = points.iter().map(|p| (f64::from(p.second), f(p)));
        let line = chart.draw_series(LineSeries::new(pts, color.stroke_width(2))).map_err(chart_err)?;
        if text {
            line.label(*name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        }
    }
    if text {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(chart_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_png_and_svg() {
        let dir = std::env::temp_dir().join(format!("braid-bench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = Chart {
            title: "IOPS vs block size".into(),
            x_label: "block size".into(),
            y_label: "IOPS".into(),
            categories: vec!["4k".into(), "64k".into(), "1m".into()],
            series: vec![
                Series { name: "braid".into(), values: vec![Some(1000.0), Some(800.0), None] },
                Series { name: "samba".into(), values: vec![Some(900.0), Some(850.0), Some(100.0)] },
            ],
        };
        let paths = write_chart(&dir.join("iops_vs_bs"), &c).unwrap();
        let png = std::fs::read(&paths[0]).unwrap();
        assert!(png.len() > 1000);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let svg = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
        assert!(svg.trim_end().ends_with("</svg>"));
        if have_font() {
            assert!(svg.contains("braid") && svg.contains("64k"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writes_a_timeline_as_png_or_svg() {
        let dir = std::env::temp_dir().join(format!("braid-bench-timeline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let points: Vec<Point> = (0..40)
            .map(|s| {
                let r = if s < 10 { 2000.0 } else { 500.0 };
                Point {
                    second: s,
                    iops: r * 2.0,
                    read_iops: r,
                    write_iops: r,
                    mib_per_s: r / 128.0,
                    read_mib_per_s: r / 256.0,
                    write_mib_per_s: r / 256.0,
                }
            })
            .collect();
        let title = Title { main: "smb://u@h/s".into(), sub: "4k random".into() };
        write_timeline(&dir.join("t.png"), &title, &points, &[500.0, 2000.0]).unwrap();
        let png = std::fs::read(dir.join("t.png")).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let img = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
        assert_eq!((img.info().width, img.info().height), TIMELINE_SIZE);
        write_timeline(&dir.join("t.svg"), &title, &points, &[500.0, 2000.0]).unwrap();
        let svg = std::fs::read_to_string(dir.join("t.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        if have_font() {
            assert!(svg.contains("IOPS") && svg.contains("MiB/s") && svg.contains("write") && svg.contains("4k random"), "labels");
            // The 2000 mark beside the axis label 2000.
            assert!(svg.matches("\n2000\n").count() >= 2, "the mark is labelled");
        }
        // One second or none still draws.
        write_timeline(&dir.join("one.png"), &title, &points[..1], &[]).unwrap();
        write_timeline(&dir.join("none.png"), &title, &[], &[f64::NAN]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
