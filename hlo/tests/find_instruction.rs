//! Finding an instruction by name: `Module::find_instruction` over the whole
//! module, `Module::find_instruction_in` in one computation. A name is unique
//! only within its computation, so the module-wide lookup takes the first in
//! print order (computations in print order, each in schedule order).

const TEXT: &str = r#"HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT sum = f32[] add(x, y)
}

ENTRY main {
  x = f32[4] parameter(0)
  zero = f32[] constant(0)
  ROOT total = f32[] reduce(x, zero), dimensions={0}, to_apply=add
}
"#;

fn module() -> hlo::Module {
    hlo::parse_module(TEXT).expect("the test module parses")
}

#[test]
fn a_name_used_in_two_computations_is_found_first_in_print_order() {
    let m = module();
    let add = m.find_computation("add").expect("add");
    let main = m.find_computation("main").expect("main");
    let x = m.find_instruction("x").expect("x");
    assert_eq!(m.inst(x).parent, add);
    let x_main = m.find_instruction_in(main, "x").expect("x in main");
    assert_ne!(x, x_main);
    assert_eq!(m.inst(x_main).parent, main);
    assert_eq!(hlo::print_shape(&m, m.inst(x_main).shape), "f32[4]");
}

#[test]
fn a_name_found_is_the_instruction_of_that_name() {
    let m = module();
    for name in ["sum", "zero", "total", "y"] {
        let id = m.find_instruction(name).expect(name);
        assert_eq!(&*m.inst(id).name, name);
    }
}

#[test]
fn a_name_absent_from_the_module_or_the_computation_is_none() {
    let m = module();
    let main = m.find_computation("main").expect("main");
    assert_eq!(m.find_instruction("no_such"), None);
    assert_eq!(m.find_instruction_in(main, "sum"), None);
}
