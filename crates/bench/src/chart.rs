//! Line charts in the style of the Azure NetApp Files / Azure Files performance pages: the
//! swept variable on x (as categories: 4k, 8k, ... or 100:0, 75:25, ...), IOPS or MiB/s on
//! y, one line per target. Written as PNG and SVG.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

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
    let io = |p: &Path, e: std::io::Error| BenchError::Io(format!("{}: {e}", p.display()));
    std::fs::write(&svg_path, svg).map_err(|e| io(&svg_path, e))?;
    let file = std::fs::File::create(&png_path).map_err(|e| io(&png_path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), SIZE.0, SIZE.1);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(chart_err)?;
    w.write_image_data(&rgb).map_err(chart_err)?;
    w.finish().map_err(chart_err)?;
    Ok(vec![png_path, svg_path])
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
}
