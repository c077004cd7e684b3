//! A model over feature rows: one ONNX input `features` [n, width] (f32),
//! one output of n finite values. The learned rankers and regressors of the
//! passes (the XLA:GPU tile ranker, the XLA:CPU kernel model) run through
//! it, on the process's ONNX Runtime environment.

use std::sync::Mutex;

use ort::session::Session;
use ort::value::TensorRef;

/// A loaded row model.
pub struct RowModel {
    session: Mutex<Session>,
    width: usize,
    origin: String,
}

impl RowModel {
    /// From ONNX bytes; `origin` names it in errors. Refused: a model whose
    /// inputs are not exactly `features`, or with other than one output.
    pub fn from_bytes(onnx: &[u8], width: usize, origin: &str) -> Result<RowModel, String> {
        let env = crate::onnx::environment().map_err(|e| e.to_string())?;
        let err = |e: ort::Error| format!("{origin}: ONNX Runtime refused the model: {e}");
        let session = Session::builder(env)
            .map_err(err)?
            .with_intra_threads(1)
            .map_err(|e| err(e.into()))?
            .commit_from_memory(onnx)
            .map_err(err)?;
        let inputs: Vec<&str> = session.inputs().iter().map(|i| i.name()).collect();
        if inputs != ["features"] || session.outputs().len() != 1 {
            return Err(format!(
                "{origin}: the model must take one input `features` [n, {width}] and give one output; this one takes {inputs:?}"
            ));
        }
        Ok(RowModel {
            session: Mutex::new(session),
            width,
            origin: origin.to_string(),
        })
    }

    /// One value per row of `data` (`rows` rows of the model's width, row-major).
    pub fn run(&self, data: &[f32], rows: usize) -> Result<Vec<f32>, String> {
        if rows == 0 {
            return Ok(Vec::new());
        }
        if data.len() != rows * self.width {
            return Err(format!(
                "{}: {} values for {rows} rows of {}",
                self.origin,
                data.len(),
                self.width
            ));
        }
        let input = TensorRef::from_array_view((vec![rows, self.width], data))
            .map_err(|e| format!("{}: input tensor: {e}", self.origin))?;
        let mut session = self
            .session
            .lock()
            .map_err(|_| "a previous model run panicked".to_string())?;
        let out = session
            .run(vec![(
                std::borrow::Cow::Borrowed("features"),
                ort::session::SessionInputValue::from(input),
            )])
            .map_err(|e| format!("{}: inference: {e}", self.origin))?;
        let (_, values) = out[0]
            .try_extract_tensor::<f32>()
            .map_err(|e| format!("{}: output: {e}", self.origin))?;
        if values.len() != rows || values.iter().any(|v| !v.is_finite()) {
            return Err(format!(
                "{}: {} values for {rows} rows, or one that is not finite",
                self.origin,
                values.len()
            ));
        }
        Ok(values.to_vec())
    }
}
