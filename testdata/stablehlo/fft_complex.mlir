"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<8x32xf32>) -> tensor<8x8xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg1: tensor<8x32xf32>):
    %2 = "func.call"(%arg1) <{callee = @fft}> : (tensor<8x32xf32>) -> tensor<8x32xcomplex<f32>>
    %3 = "stablehlo.real"(%2) : (tensor<8x32xcomplex<f32>>) -> tensor<8x32xf32>
    %4 = "stablehlo.transpose"(%arg1) <{permutation = array<i64: 1, 0>}> : (tensor<8x32xf32>) -> tensor<32x8xf32>
    %5 = "stablehlo.dot_general"(%3, %4) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8x32xf32>, tensor<32x8xf32>) -> tensor<8x8xf32>
    "func.return"(%5) : (tensor<8x8xf32>) -> ()
  }) : () -> ()
  "func.func"() <{arg_attrs = [{}], function_type = (tensor<8x32xf32>) -> tensor<8x32xcomplex<f32>>, res_attrs = [{}], sym_name = "fft", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<8x32xf32>):
    %0 = "stablehlo.convert"(%arg0) : (tensor<8x32xf32>) -> tensor<8x32xcomplex<f32>>
    %1 = "stablehlo.fft"(%0) <{fft_length = array<i64: 32>, fft_type = #stablehlo<fft_type FFT>}> : (tensor<8x32xcomplex<f32>>) -> tensor<8x32xcomplex<f32>>
    "func.return"(%1) : (tensor<8x32xcomplex<f32>>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
